// The daemon's side of the store: loans, merges, returns and the change feed.
// Loan times all come from this region's Redis TIME (trap 7).
import type { KeyPolicy, Timing, LoanRecord } from "@geoquota/lease";
import { type KeyArgs, keyArgsBuilder } from "./args.js";
import { num, str } from "./decode.js";
import { RedisStoreError } from "./errors.js";
import {
  ALL_SHARDS,
  assertName,
  dirtyKey,
  drainGenKey,
  parseDirtyMember,
  type RedisClient,
  shardOf,
} from "./keys.js";
import { durabilityWaiter, ensureIncarnation, shardNode } from "./replication.js";
import { bindScripts, type ScriptCaller } from "./scripts.js";
import { inspectKey, type KeyStateView } from "./store.js";

export type GrantResult =
  | {
      readonly ok: true;
      readonly loan: LoanRecord;
      readonly nowUs: number;
      /** False unless every configured replica acknowledged in time: do not ship the loan. */
      readonly durable: boolean;
    }
  | {
      readonly ok: false;
      readonly reason: "recovering" | "algorithm" | "units" | "floor" | "leased" | "self";
      readonly nowUs: number;
    };

export interface GossipStore {
  readonly region: string;
  /** The marker `<id>:<bornUs>` of the tenant's shard (shard 0 without a tenant; created, in recovery, if missing). */
  currentIncarnation(tenant?: string): Promise<{ marker: string; id: string; bornUs: number; nowUs: number }>;
  /** Lends `units` ppm of this region's base to `borrower` until now + duration (default D). */
  grantLoan(policy: KeyPolicy, borrower: string, units: number, durationUs?: number): Promise<GrantResult>;
  /** Merges loans addressed to this region and remote counter entries (`p|r.i` → value, max). */
  mergeRemote(
    policy: KeyPolicy,
    loans: readonly LoanRecord[],
    counters: Readonly<Record<string, number>>,
  ): Promise<{ loansChanged: number; countersChanged: number; nowUs: number }>;
  /**
   * Returns early the loan held from `lender`; send `seq` to the lender only if `durable`.
   * `seq` 0: nothing held, or refused because the share backs outstanding in-process leases.
   */
  returnLoan(policy: KeyPolicy, lender: string): Promise<{ seq: number; nowUs: number; durable: boolean }>;
  /** The lender's side of a return. */
  receiveReturn(
    policy: KeyPolicy,
    borrower: string,
    seq: number,
  ): Promise<{ dropped: number; nowUs: number }>;
  /** Pops up to `max` changed keys from the change feeds of all shards. */
  drainDirty(max: number): Promise<{ nowUs: number; keys: { tenant: string; resource: string }[] }>;
  /** Everything the region holds for one key (counters, loans, leases, share), read-only. */
  readKeyState(policy: KeyPolicy): Promise<KeyStateView>;
  /**
   * Waits until every configured replica holds every write the key's shard
   * accepted before the call (replication.ts `durabilityWaiter`); true when
   * they do (always, with `replicas: 0`). What a read returned before the call
   * may be shipped once this is true.
   */
  waitDurable(policy: KeyPolicy): Promise<boolean>;
}

export interface GossipStoreOptions {
  readonly redis: RedisClient;
  readonly region: string;
  readonly timing: Timing;
  /** WAIT timeout for grant and return durability, ms. Default 100. */
  readonly waitTimeoutMs?: number;
  /**
   * Replicas every grant and return must reach before it is `durable`
   * (config `redis.replicas`). Default 0: no replicas, nothing waited for.
   */
  readonly replicas?: number;
}

const MAX_DRAIN = 10_000;

export function createGossipStore(options: GossipStoreOptions): GossipStore {
  const { redis, region, timing } = options;
  assertName("region", region);
  const scripts: ScriptCaller = bindScripts(redis);
  const args: (p: KeyPolicy) => KeyArgs = keyArgsBuilder(timing);
  const replicas = options.replicas ?? 0;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `replicas ${replicas}`);
  }
  const waitDurable = durabilityWaiter(redis, { replicas, timeoutMs: options.waitTimeoutMs ?? 100 });
  let drainStart = 0;

  return {
    region,

    async currentIncarnation(tenant) {
      if (tenant !== undefined) assertName("tenant", tenant);
      const r = await ensureIncarnation(redis, tenant === undefined ? 0 : shardOf(tenant));
      const at = r.marker.indexOf(":");
      return {
        marker: r.marker,
        id: r.marker.slice(0, at),
        bornUs: Number(r.marker.slice(at + 1)),
        nowUs: r.nowUs,
      };
    },

    async grantLoan(policy, borrower, units, durationUs = timing.loanDurationUs) {
      assertName("borrower", borrower);
      if (!(durationUs > 0) || !Number.isInteger(durationUs)) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `loan duration ${durationUs} µs`);
      }
      const a = args(policy);
      const r = await scripts.call("loanGrant", a.keys, [
        region,
        ...a.policyArgv,
        borrower,
        units,
        durationUs,
      ]);
      const nowUs = num(r[5], "now");
      if (num(r[0], "ok") !== 1) {
        return { ok: false, reason: str(r[1], "reason") as "floor", nowUs };
      }
      const { durable } = await waitDurable(a.shard);
      const loan: LoanRecord = {
        lender: region,
        borrower,
        units: num(r[2], "units"),
        deadlineUs: num(r[3], "deadline"),
        seq: num(r[4], "seq"),
      };
      return { ok: true, loan, nowUs, durable };
    },

    async mergeRemote(policy, loans, counters) {
      const a = args(policy);
      const argv: (string | number)[] = [region, ...a.policyArgv];
      const mine = loans.filter((l) => l.borrower === region);
      argv.push(mine.length);
      for (const l of mine) {
        assertName("lender", l.lender);
        argv.push(l.lender, l.units, l.deadlineUs, l.seq);
      }
      const entries = Object.entries(counters).filter(([f, v]) => /^[pnd]\|/.test(f) && Number.isFinite(v));
      argv.push(entries.length);
      for (const [f, v] of entries) argv.push(f, String(v));
      const r = await scripts.call("loanMerge", a.keys, argv);
      return {
        loansChanged: num(r[0], "loans"),
        countersChanged: num(r[1], "counters"),
        nowUs: num(r[2], "now"),
      };
    },

    async returnLoan(policy, lender) {
      assertName("lender", lender);
      const a = args(policy);
      const r = await scripts.call("loanReturn", a.keys, [region, ...a.policyArgv, lender]);
      const seq = num(r[0], "seq");
      const durable = seq > 0 ? (await waitDurable(a.shard)).durable : true;
      return { seq, nowUs: num(r[1], "now"), durable };
    },

    async receiveReturn(policy, borrower, seq) {
      assertName("borrower", borrower);
      const a = args(policy);
      const r = await scripts.call("loanReturnReceived", a.keys, [region, ...a.policyArgv, borrower, seq]);
      return { dropped: num(r[0], "dropped"), nowUs: num(r[1], "now") };
    },

    async drainDirty(max) {
      if (!Number.isInteger(max) || max < 1 || max > MAX_DRAIN) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `drain max ${max}`);
      }
      // One SCARD per shard to share the budget (starting at a rotating shard, so a
      // budget smaller than the backlog serves every shard in turn), then drain_dirty
      // on every shard: each starts a new drain generation even when it pops
      // nothing, as the single feed did.
      const sizes = await Promise.all(ALL_SHARDS.map((k) => shardNode(redis, k).scard(dirtyKey(k))));
      const take = ALL_SHARDS.map(() => 0);
      let budget = max;
      for (let i = 0; i < ALL_SHARDS.length && budget > 0; i++) {
        const k = (drainStart + i) % ALL_SHARDS.length;
        const n = Math.min(sizes[k] ?? 0, budget);
        take[k] = n;
        budget -= n;
      }
      drainStart = (drainStart + 1) % ALL_SHARDS.length;
      const replies = await Promise.all(
        ALL_SHARDS.map((k) => scripts.call("drainDirty", [dirtyKey(k), drainGenKey(k)], [take[k] ?? 0])),
      );
      let nowUs = 0;
      const keys: { tenant: string; resource: string }[] = [];
      for (const r of replies) {
        nowUs = Math.max(nowUs, num(r[0], "now"));
        if (Array.isArray(r[1])) for (const m of r[1]) keys.push(parseDirtyMember(str(m, "member")));
      }
      return { nowUs, keys };
    },

    readKeyState(policy) {
      return inspectKey(scripts, args(policy), region);
    },

    async waitDurable(policy) {
      return (await waitDurable(shardOf(policy.tenant))).durable;
    },
  };
}
