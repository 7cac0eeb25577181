// The daemon's store port (daemon/store-port.ts) implemented by the pure model
// of a region's Redis, with the same translation and the same behaviour as the
// Redis adapter (daemon/redis-port.ts over the limiter's GossipStore) today:
// every method is one or more scripts, each atomic at the region's Redis TIME
// of the instant it runs; grants and returns wait for a replica (WAIT) and are
// reported only when durable; readKey reports every `g|`/`r|` field Redis
// holds. The translation to the CRDT record is the daemon's own
// (@geoquota/gossip keyStateOf, mergeOf), as in redis-port.ts.
import type { ReturnedMark } from "@geoquota/crdt";
import type { KeyLimit, KeyPolicy, LoanRecord, ReceivedLoan } from "@geoquota/core";
import {
  type DaemonStore,
  type KeyReading,
  keyStateOf,
  mergeOf,
  type RedisKeyView,
  type RolloutPort,
} from "@geoquota/gossip";
import { counterSetsOf, keyLimit } from "@geoquota/redis";
import { decodeProposal } from "@geoquota/rollout";
import type { ModelRedis } from "./region.js";

/** The simulation's only key, as the daemon names it. */
export const MODEL_TENANT = "tenant";
export const MODEL_RESOURCE = "resource";
export const MODEL_KEY = `${MODEL_TENANT}|${MODEL_RESOURCE}`;

/** A key's policy as the scripts receive it (the limiter's own translation). */
export const keyLimitOf = keyLimit;

export interface ModelStoreEnv {
  readonly region: string;
  readonly redis: () => ModelRedis;
  /**
   * Runs one script: `op` executes atomically at a later instant of the
   * simulated clock with that instant's Redis TIME; the promise settles then.
   */
  exec<T>(op: (nowUs: number) => T): Promise<T>;
  /** WAIT 1 <timeout>: whether a replica acknowledged every write so far (runs after the script). */
  waitDurable(): Promise<boolean>;
  /**
   * The daemon's primary watcher found a checked setting unsafe (redis-port.ts
   * drifting(): an evicting policy, an extra replica): grants, early returns
   * and read-back loans are held. Absent: never.
   */
  readonly drifting?: () => boolean;
}

export function createModelDaemonStore(env: ModelStoreEnv): DaemonStore {
  const region = env.region;
  const drifted = env.drifting ?? (() => false);
  const appliedReturns = new Map<string, number>();

  const limitOf = (policy: KeyPolicy): KeyLimit => {
    if (policy.tenant !== MODEL_TENANT || policy.resource !== MODEL_RESOURCE) {
      throw new Error(`model store: unknown key ${policy.tenant}|${policy.resource}`);
    }
    return keyLimitOf(policy);
  };

  return {
    redisTimeUs() {
      return env.exec((now) => now);
    },

    drainDirty(max) {
      return env.exec(() => {
        const r = env.redis();
        if (!r.dirty || max <= 0) return [];
        r.dirty = false;
        return [MODEL_KEY];
      });
    },

    sweepKeys(_cursor, _count) {
      // One key: every pass is one page.
      return env.exec(() => ({ cursor: "0", keys: [MODEL_KEY] }));
    },

    readKey(policy): Promise<KeyReading> {
      limitOf(policy);
      return env.exec((now) => {
        const r = env.redis();
        return keyStateOf(region, r.timing.epsilonUs, policy.limit.capacity, redisViewOf(region, r, now));
      });
    },

    async mergeRemote(policy, record) {
      const limit = limitOf(policy);
      const m = mergeOf(region, record);
      const loans: ReceivedLoan[] = m.loans.map((l) => ({
        lender: l.lender,
        loan: { units: l.units, deadlineUs: l.deadlineUs, seq: l.seq },
      }));
      const counters = new Map(Object.entries(m.counterFields));
      await env.exec((now) => env.redis().merge(limit, loans, counters, now));
      for (const mark of record.returned.values()) {
        if (mark.lender !== region) continue;
        const id = `${policy.tenant}|${policy.resource}|${mark.borrower}`;
        if ((appliedReturns.get(id) ?? -1) >= mark.seq) continue;
        await env.exec((now) => env.redis().receiveReturn(limit, mark.borrower, mark.seq, now));
        appliedReturns.set(id, mark.seq);
      }
    },

    async waitDurable(policy) {
      limitOf(policy);
      if (drifted()) return false;
      return env.waitDurable();
    },

    async grantLoan(policy, borrower, units) {
      const limit = limitOf(policy);
      if (drifted()) return null;
      const loan = await env.exec((now) => env.redis().grant(limit, borrower, units, now));
      if (loan === undefined) return null;
      // A grant not yet on a replica is held back (redis-port.ts).
      if (!(await env.waitDurable())) return null;
      return { lender: region, borrower, units: loan.units, deadlineUs: loan.deadlineUs, seq: loan.seq };
    },

    async returnLoan(policy, lender, _seq): Promise<ReturnedMark | null> {
      const limit = limitOf(policy);
      if (drifted()) return null;
      const seq = await env.exec((now) => env.redis().giveBack(limit, lender, now));
      const durable = seq > 0 ? await env.waitDurable() : true;
      if (!durable || seq <= 0) return null;
      return { lender, borrower: region, seq };
    },

    async close() {},
  };
}

/** The rollout's Redis port over the model (rollout store.ts: GET/SET gq:policy + WAIT, LPOP proposals, TIME). */
export function createModelRolloutPort(env: ModelStoreEnv): RolloutPort {
  return {
    readSnapshotRaw: () => env.exec(() => env.redis().policy),
    async writeSnapshot(raw) {
      await env.exec(() => env.redis().writePolicy(raw));
      // daemon main.ts: not durable while a setting drifted.
      return (await env.waitDurable()) && env.drifting?.() !== true;
    },
    popProposals: (max) => env.exec(() => env.redis().proposals.splice(0, max).map(decodeProposal)),
    timeUs: () => env.exec((now) => now),
  };
}

/** The Redis view of the model's key, as inspect.lua reports it (store.ts inspectKey). */
function redisViewOf(region: string, r: ModelRedis, nowUs: number): RedisKeyView {
  const { counters, book, leases } = r.key;
  const granted: LoanRecord[] = [];
  for (const [borrower, g] of book.granted) granted.push({ lender: region, borrower, ...entry(g) });
  const loansOut: LoanRecord[] = [];
  for (const [borrower, entries] of book.outstanding)
    for (const o of entries) loansOut.push({ lender: region, borrower, ...entry(o) });
  const loansIn: LoanRecord[] = [];
  for (const [lender, l] of book.received) loansIn.push({ lender, borrower: region, ...entry(l) });
  return {
    nowUs,
    recovering: r.recovering(nowUs),
    counters: counterSetsOf(counters),
    granted,
    returned: Object.fromEntries(book.returned),
    loansOut,
    loansIn,
    leases: Object.fromEntries(leases),
  };
}

function entry(l: { units: number; deadlineUs: number; seq: number }) {
  return { units: l.units, deadlineUs: l.deadlineUs, seq: l.seq };
}
