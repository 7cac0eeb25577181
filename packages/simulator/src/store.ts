// The daemon's store port (daemon/store-port.ts) implemented by the pure model
// of a region's Redis, with the same translation and the same behaviour as the
// Redis adapter (daemon/redis-port.ts over the limiter's GossipStore) today:
// every method is one or more scripts, each atomic at the region's Redis TIME
// of the instant it runs; grants and returns wait for a replica (WAIT) and are
// reported only when durable; readKey reports every `g|`/`r|` field Redis
// holds. Keep this file in step with redis-port.ts.
import { KeyRecord, type Loan, type ReturnedMark } from "@geoquota/crdt";
import { type KeyLimit, loanOutstanding, loanUsable, type ReceivedLoan } from "@geoquota/core";
import type { KeyPolicy } from "@geoquota/core";
import { keyLimit } from "@geoquota/redis";
import { decodeProposal } from "@geoquota/rollout";
import type { DaemonStore, InboundLoan, KeyState, RolloutPort } from "@geoquota/gossip";
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

    readKey(policy): Promise<KeyState> {
      limitOf(policy);
      return env.exec((now) => {
        const r = env.redis();
        const key = r.key;
        const eps = r.timing.epsilonUs;
        const record = KeyRecord.initial();
        for (const [field, v] of key.counters) {
          const kind = field.slice(0, 2);
          const replica = field.slice(2);
          if (kind === "p|") record.consumed.p.set(replica, v);
          else if (kind === "n|") record.consumed.n.set(replica, v);
          else if (kind === "d|") record.denied.set(replica, v);
        }
        const current: Record<string, number> = {};
        for (const [borrower, g] of key.book.granted) {
          const loan: Loan = {
            lender: region,
            borrower,
            units: g.units,
            deadlineUs: g.deadlineUs,
            seq: g.seq,
          };
          record.loans.set(`${region}>${borrower}`, loan);
          if (loanOutstanding(g, now, eps)) current[borrower] = g.units;
        }
        for (const [lender, seq] of key.book.returned) {
          record.returned.set(`${lender}>${region}`, { lender, borrower: region, seq });
        }
        const reserved: Record<string, number> = {};
        for (const [borrower, entries] of key.book.outstanding) {
          for (const o of entries) {
            if (loanOutstanding(o, now, eps)) reserved[borrower] = Math.max(reserved[borrower] ?? 0, o.units);
          }
        }
        const inUse: InboundLoan[] = [];
        for (const [lender, l] of key.book.received) {
          if (loanUsable(l, key.book.returned.get(lender) ?? 0, now, eps)) {
            inUse.push({ lender, units: l.units, seq: l.seq });
          }
        }
        let leased = 0;
        for (const l of key.leases.values()) if (now < l.expiryUs) leased += l.tokens;
        const capacity = policy.limit.capacity;
        const leasePinnedPpm = leased > 0 && capacity > 0 ? Math.ceil((1_000_000 * leased) / capacity) : 0;
        return {
          nowUs: now,
          recovering: r.recovering(now),
          record,
          reserved,
          current,
          inUse,
          leasePinnedPpm,
        };
      });
    },

    async mergeRemote(policy, record) {
      const limit = limitOf(policy);
      const loans: ReceivedLoan[] = [];
      for (const l of record.loans.values()) {
        if (l.borrower === region) {
          loans.push({ lender: l.lender, loan: { units: l.units, deadlineUs: l.deadlineUs, seq: l.seq } });
        }
      }
      const counters = new Map<string, number>();
      for (const [replica, n] of record.consumed.p) counters.set(`p|${replica}`, n);
      for (const [replica, n] of record.consumed.n) counters.set(`n|${replica}`, n);
      for (const [replica, n] of record.denied) counters.set(`d|${replica}`, n);
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
