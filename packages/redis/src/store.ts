// The Redis-backed RegionStore: one EVALSHA per call against the region's
// own Redis (G3). All times come from the scripts' Redis TIME.
import { type CounterSets, counterSetsOf } from "./counter-fields.js";
import { randomBytes } from "node:crypto";
import {
  type AssignmentAsk,
  type AssignmentGrant,
  type CompoundCheckItem,
  type CompoundDecision,
  type Decision,
  type KeyPolicy,
  type Lease,
  type LoanRecord,
  type QuotaView,
  type RefundOutcome,
  type RefundReceiptRef,
  type RefundRefusal,
  type RegionStore,
  type ResetOutcome,
  SHARE_UNITS,
  type Timing,
} from "@geoquota/core";
import {
  assertCost,
  type CheckHead,
  checkCost,
  checkHead as buildCheckHead,
  type KeyArgs,
  keyArgsBuilder,
} from "./args.js";
import { parseLoan } from "./decode.js";
import { RedisStoreError } from "./errors.js";
import { assertName, isCluster, type RedisClient, WAKE_CHANNEL } from "./keys.js";
import type { DecisionReply, InspectReply } from "./replies.js";
import { type Certifier, createCertifier, type Ticket } from "./certificate.js";
import { bindScripts, type ScriptCaller } from "./scripts.js";
import {
  assignReserveArgs,
  assignUsageArgs,
  checkCompoundArgs,
  keyHeadArgs,
  leaseAcquireArgs,
  leaseReleaseArgs,
  refundArgs,
} from "./script-args.js";
import { type CheckBatching, createCheckBatcher } from "./batch.js";

export interface RedisStoreOptions {
  /** The region's Redis or Redis Cluster (this store never closes it unless `ownsConnection`). */
  readonly redis: RedisClient;
  readonly region: string;
  readonly timing: Timing;
  /** close() quits the connection too. Default false. */
  readonly ownsConnection?: boolean;
  /**
   * Durable admissions (DESIGN §4, docs/internals.md "Durable admissions"):
   * with `replicas` > 0, an admitting check, compound check and lease grant
   * are answered only once a durability certificate covers the write
   * (certificate.ts: a probe + `WAIT` + `ROLE` on the SAME connection that
   * carried the write, with no reconnect since the write was issued, acked by
   * every configured and every connected replica; one WAIT per connection and
   * event-loop turn covers every call that replied before it), so a failover
   * — also one behind an unchanged address — never forgets quota that was
   * handed out. A certificate that fails makes the call fail
   * (`NotDurableError`: the breaker counts it; the limiter takes its degraded
   * path): the tokens stay consumed in Redis, which only under-admits.
   * Any client options are safe: a write ioredis held in its offline queue
   * goes out on the socket the WAIT then uses (certified on the server that
   * took it); a write it resends after a reconnect
   * (`autoResendUnfulfilledCommands`, `maxRetriesPerRequest`,
   * `reconnectOnError` returning 2) may run on both servers but certifies
   * nothing (NotDurableError: under-admits).
   * While a WAIT runs it blocks the connection (up to `timeoutMs` when a
   * replica is missing).
   * Absent or `replicas: 0`: answered at once (a failover may then forget up
   * to the replication lag plus `redis.primaryCheckMs` of admissions).
   */
  readonly durability?: { readonly replicas: number; readonly timeoutMs: number };
  /**
   * Micro-batching of `check` (batch.ts): concurrent checks go to Redis as one
   * lua/check_batch.lua call per connection (per shard on a Redis Cluster), sent when
   * `maxChecks` wait or `maxWaitUs` after the first; each decision is check.lua's, in arrival
   * order, and durability holds per batch. Absent: one call per check.
   */
  readonly batch?: CheckBatching;
}

/** The call's write was not acknowledged by every replica (DESIGN §4, durable admissions). */
export class NotDurableError extends Error {
  constructor(
    readonly op: string,
    readonly acked: number,
    readonly replicas: number,
  ) {
    super(
      `${op}: ${acked} of ${replicas} replicas acknowledged the write on its connection without a reconnect; not answered as admitted`,
    );
    this.name = "NotDurableError";
  }
}

/** A decision plus the raw slice figures the scripts return (tests replay them through the model). */
export interface StoreDecision extends Decision {
  /** Tokens (rate algorithms, may be < 0 under a lease debt) or admissible cost (windows) after the decision. */
  readonly tokens: number;
  /** Capacity of this region's slice now (rate: minus leased tokens; windows: per window). */
  readonly capacity: number;
  readonly ratePerSecond: number;
}

export interface StoreCompoundDecision extends CompoundDecision {
  readonly parts: readonly StoreDecision[];
  readonly nowUs: number;
}

export interface RedisRegionStore extends RegionStore {
  check(policy: KeyPolicy, cost: number): Promise<StoreDecision>;
  checkCompound(items: readonly CompoundCheckItem[]): Promise<StoreCompoundDecision>;
  refund(policy: KeyPolicy, cost: number, receipt: RefundReceiptRef): Promise<RefundOutcome<StoreDecision>>;
  /**
   * Releases `releases` (as `releaseLease` would, in order) and acquires a new
   * lease of up to `tokens` (0: release only) in one round-trip, at one Redis
   * TIME. `returned[i]` is what went back for `releases[i]`.
   */
  renewLease(
    policy: KeyPolicy,
    releases: readonly LeaseReport[],
    tokens: number,
    durationMs: number,
  ): Promise<{ lease: Lease; returned: number[] }>;
  /** lua/assign_reserve.lua (RLQS, token bucket only). */
  reserveAssignment(policy: KeyPolicy, ask: AssignmentAsk): Promise<AssignmentGrant>;
  /** lua/assign_usage.lua (RLQS, token bucket only). */
  countUsage(policy: KeyPolicy, allowed: number, denied: number): Promise<void>;
  /** Returns what went back to the bucket (0 after expiry). */
  releaseLeaseDetailed(
    policy: KeyPolicy,
    leaseId: string,
    used: number,
  ): Promise<{ returned: number; nowUs: number }>;
}

const MAX_LEASE_TOKENS = 1_000_000;
/** An assignment's id (and the one it supersedes): `q|<id>` in P:k. */
const ASSIGNMENT_ID = /^[0-9A-Za-z_.-]{1,64}$/;

/** lua/refund.lua's refusal statuses. */
const REFUND_REFUSALS: Readonly<Record<number, RefundRefusal>> = {
  [-1]: "used",
  [-2]: "expired",
  [-3]: "lost",
};

/** A finished lease reported back: `used` of its tokens were consumed. */
export interface LeaseReport {
  readonly leaseId: string;
  readonly used: number;
}

/** Releases carried by one renewLease call (keeps the script's argument list bounded). */
export const MAX_RELEASES_PER_CALL = 64;

const U = SHARE_UNITS;

/**
 * Maps a decision reply (plus the cost asked) to a Decision. Capacity and
 * rate are derived here rather than formatted by the script (cheaper for
 * Redis), with the script's (and the model's) double operations in the same
 * order: rate algorithms C·s/U − leased and R·s/U, windows C·base/U and 0.
 */
export function toDecision(policy: KeyPolicy, r: DecisionReply, nowUs: number, cost: number): StoreDecision {
  const { allowed, share, leased, recovering, resetUs } = r;
  const tokens = r.remaining;
  const l = policy.limit;
  const rateAlg = l.algorithm === "token_bucket" || l.algorithm === "gcra";
  const capacity = rateAlg ? (l.capacity * share) / U - leased : (l.capacity * policy.baseShare) / U;
  const rate = rateAlg ? (l.refillPerSecond * share) / U : 0;
  const remaining = Math.max(tokens, 0);
  let resetSeconds: number;
  let retryAfterSeconds: number;
  if (rate > 0) {
    resetSeconds = capacity > tokens ? (capacity - tokens) / rate : 0;
    // Never admissible at this share: the full-refill time is the honest hint.
    const fullRefill =
      policy.limit.refillPerSecond > 0 ? policy.limit.capacity / policy.limit.refillPerSecond : 0;
    retryAfterSeconds = allowed ? 0 : cost <= capacity ? (cost - tokens) / rate : fullRefill;
  } else {
    resetSeconds = resetUs / 1e6;
    retryAfterSeconds = allowed ? 0 : resetUs / 1e6;
  }
  return {
    allowed,
    limit: policy.limit.capacity,
    remaining,
    resetSeconds,
    retryAfterSeconds,
    share,
    nowUs,
    recovering,
    tokens,
    capacity,
    ratePerSecond: rate,
  };
}

/**
 * The store's durability gate: `issue(shard)` right before sending a write,
 * `settle(op, ticket)` once it replied and admitted (throws NotDurableError
 * unless a certificate covers it).
 */
function durableGate(certifier: Certifier) {
  return {
    issue: (shard: number): Ticket => certifier.ticket(shard),
    async settle(op: string, ticket: Ticket): Promise<void> {
      const d = await certifier.certify(ticket);
      if (!d.durable) throw new NotDurableError(op, d.acked, certifier.replicas);
    },
  };
}

export function createRedisStore(options: RedisStoreOptions): RedisRegionStore {
  const { redis, region, timing } = options;
  assertName("region", region);
  const scripts: ScriptCaller = bindScripts(redis);
  const args: (p: KeyPolicy) => KeyArgs = keyArgsBuilder(timing);
  const cluster = isCluster(redis);
  // The certificate is taken on the connection that carries the writes
  // (certificate.ts): a WAIT on another connection may reach another server
  // after a failover behind one address.
  const replicas = options.durability?.replicas ?? 0;
  // Absent without replicas: the hot path then pays nothing for durability.
  const gate =
    replicas > 0
      ? durableGate(createCertifier(redis, { replicas, timeoutMs: options.durability?.timeoutMs ?? 50 }))
      : undefined;

  // check's KEYS + region, joined once per policy object (the limiter keeps one
  // object per key and policy version), arity checked then; each call appends the cost.
  const checkCall = scripts.prepare("check", 1);
  const checkHeads = new WeakMap<KeyPolicy, { head: CheckHead; shard: number }>();
  const checkHead = (policy: KeyPolicy) => {
    let h = checkHeads.get(policy);
    if (h === undefined) {
      const a = args(policy);
      checkCall.checkHead(a.keys.length, 1);
      h = { head: buildCheckHead(a, region), shard: a.shard };
      checkHeads.set(policy, h);
    }
    return h;
  };

  const checkOne = async (policy: KeyPolicy, cost: number): Promise<StoreDecision> => {
    const c = checkCost(cost);
    const a = checkHead(policy);
    const ticket = gate?.issue(a.shard);
    const r = await checkCall.call(a.head, c);
    if (ticket !== undefined && r.allowed) await gate?.settle("check", ticket);
    return toDecision(policy, r, r.nowUs, cost);
  };

  const batcher =
    options.batch === undefined
      ? undefined
      : createCheckBatcher<StoreDecision>(options.batch, {
          region,
          args,
          cluster,
          call: scripts.prepareItems("checkBatch"),
          decide: (policy, r, cost) => toDecision(policy, r, r.nowUs, cost),
          ...(gate === undefined
            ? {}
            : {
                issue: (shard: number) => gate.issue(shard),
                settle: (ticket: unknown) => gate.settle("check", ticket as Ticket),
              }),
        });

  const renew = async (
    policy: KeyPolicy,
    releases: readonly LeaseReport[],
    tokens: number,
    durationMs: number,
  ): Promise<{ lease: Lease; returned: number[] }> => {
    if (policy.limit.algorithm !== "token_bucket") {
      throw new RedisStoreError("GQ_ERR_LEASE_ALGORITHM", policy.limit.algorithm);
    }
    if (!Number.isInteger(tokens) || tokens < 0 || tokens > MAX_LEASE_TOKENS) {
      throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `lease tokens ${tokens}`);
    }
    // A lease may not outlive D: P:b's TTL (C/r + D + 3ε) must cover its expiry plus a refill.
    if (!(durationMs > 0) || durationMs * 1000 > timing.loanDurationUs) {
      throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `lease duration ${durationMs} ms (max D)`);
    }
    if (releases.length > MAX_RELEASES_PER_CALL) {
      throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `${releases.length} releases in one call`);
    }
    const a = args(policy);
    const leaseId = randomBytes(8).toString("hex");
    for (const rel of releases) {
      if (!Number.isFinite(rel.used) || rel.used < 0)
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `used ${rel.used}`);
    }
    const call = leaseAcquireArgs(a, region, leaseId, tokens, Math.floor(durationMs * 1000), releases);
    const ticket = gate?.issue(a.shard);
    const r = await scripts.run("leaseAcquire", call);
    // Granted tokens are spent without asking Redis again: durable first.
    if (ticket !== undefined && r.granted > 0) await gate?.settle("leaseAcquire", ticket);
    if (r.returned.length !== releases.length) {
      throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `leaseAcquire: ${r.returned.length} returned values`);
    }
    return {
      lease: { leaseId, granted: r.granted, expiryUs: r.expiryUs, nowUs: r.nowUs },
      returned: [...r.returned],
    };
  };

  return {
    region,
    check: batcher === undefined ? checkOne : batcher.check,
    async refund(policy, cost, receipt) {
      assertCost(cost);
      const { id, admittedUs, expiresUs } = receipt;
      const ok =
        /^[0-9A-Za-z_-]{1,64}$/.test(id) && Number.isSafeInteger(admittedUs) && expiresUs > admittedUs;
      if (!ok || !Number.isSafeInteger(expiresUs)) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `refund receipt ${JSON.stringify(receipt)}`);
      }
      const r = await scripts.run("refund", refundArgs(args(policy), region, cost, receipt));
      const { status, nowUs } = r;
      if (status !== 1) {
        const reason = REFUND_REFUSALS[status];
        if (reason === undefined) throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `refund status ${status}`);
        return { refunded: false, reason, nowUs };
      }
      return {
        refunded: true,
        decision: toDecision(policy, r.decision, nowUs, cost),
      };
    },

    async checkCompound(items) {
      const seen = new Set<string>();
      let firstShard = -1;
      const itemArgs = items.map((it) => {
        assertCost(it.cost);
        const a = args(it.policy);
        const id = `${it.policy.tenant}\u0000${it.policy.resource}`;
        if (seen.has(id)) throw new RedisStoreError("GQ_ERR_COMPOUND_DUPLICATE", id.replace("\u0000", "/"));
        seen.add(id);
        if (cluster && a.shard !== firstShard && firstShard >= 0) {
          throw new RedisStoreError(
            "GQ_ERR_BAD_ARGUMENT",
            "a compound check on Redis Cluster needs all tenants in one shard (one hash slot)",
          );
        }
        if (firstShard < 0) firstShard = a.shard;
        return { args: a, cost: it.cost, need: it.need };
      });
      if (items.length === 0) throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", "empty compound check");
      for (const it of items) if (it.need !== undefined) assertCost(it.need);
      const ticket = gate?.issue(firstShard);
      const r = await scripts.run("checkCompound", checkCompoundArgs(region, itemArgs));
      const { nowUs } = r;
      if (ticket !== undefined && r.allowed) await gate?.settle("checkCompound", ticket);
      if (r.parts.length !== items.length) {
        throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `checkCompound: ${r.parts.length} decisions`);
      }
      const parts = items.map((it, i) => toDecision(it.policy, r.parts[i] as DecisionReply, nowUs, it.cost));
      return { allowed: r.allowed, failedIndex: r.failedIndex, parts, nowUs };
    },

    async acquireLease(policy, tokens, durationMs): Promise<Lease> {
      if (!Number.isInteger(tokens) || tokens < 1) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `lease tokens ${tokens}`);
      }
      return (await renew(policy, [], tokens, durationMs)).lease;
    },

    renewLease: (policy, releases, tokens, durationMs) => renew(policy, releases, tokens, durationMs),

    async releaseLeaseDetailed(policy, leaseId, used) {
      if (!Number.isFinite(used) || used < 0)
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `used ${used}`);
      return scripts.run("leaseRelease", leaseReleaseArgs(args(policy), region, leaseId, used));
    },

    async releaseLease(policy, leaseId, used) {
      await this.releaseLeaseDetailed(policy, leaseId, used);
    },

    async reserveAssignment(policy, ask) {
      if (policy.limit.algorithm !== "token_bucket") {
        throw new RedisStoreError("GQ_ERR_LEASE_ALGORITHM", policy.limit.algorithm);
      }
      const ok =
        ASSIGNMENT_ID.test(ask.id) &&
        (ask.supersedes === undefined || ASSIGNMENT_ID.test(ask.supersedes)) &&
        Number.isSafeInteger(ask.burst) &&
        ask.burst >= 0 &&
        Number.isFinite(ask.rate) &&
        ask.rate >= 0 &&
        Number.isSafeInteger(ask.ttlUs) &&
        ask.ttlUs > 0 &&
        Number.isSafeInteger(ask.marginUs) &&
        ask.marginUs >= 0;
      if (!ok) throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `assignment ${JSON.stringify(ask)}`);
      const a = args(policy);
      const call = assignReserveArgs(
        a,
        region,
        ask.id,
        ask.burst,
        ask.rate,
        ask.ttlUs,
        ask.marginUs,
        ask.supersedes ?? "",
      );
      const ticket = gate?.issue(a.shard);
      const r = await scripts.run("assignReserve", call);
      // The proxy spends a reservation without asking again: durable before it is sent.
      if (ticket !== undefined && r.ttlUs > 0) await gate?.settle("assignReserve", ticket);
      return r;
    },

    async countUsage(policy, allowed, denied) {
      if (policy.limit.algorithm !== "token_bucket") {
        throw new RedisStoreError("GQ_ERR_LEASE_ALGORITHM", policy.limit.algorithm);
      }
      for (const n of [allowed, denied]) {
        if (!Number.isSafeInteger(n) || n < 0) throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `usage ${n}`);
      }
      await scripts.run("assignUsage", assignUsageArgs(args(policy), region, allowed, denied));
    },

    async inspect(policy): Promise<QuotaView> {
      const v = await inspectKey(scripts, args(policy), region);
      return {
        tenant: policy.tenant,
        resource: policy.resource,
        nowUs: v.nowUs,
        share: v.share,
        recovering: v.recovering,
        tokens: v.tokens,
        counters: v.counters,
        loansOut: v.loansOut,
        loansIn: v.loansIn,
      };
    },

    async reset(policy): Promise<ResetOutcome> {
      const r = await scripts.run("reset", keyHeadArgs(args(policy), region));
      return { before: r.before, after: r.after, share: r.share, nowUs: r.nowUs };
    },

    wake() {
      // One PUBLISH on the connection the checks use; nothing waits for it, and an error (the
      // connection's own, reported there) only leaves the daemon's timer round.
      redis.publish(WAKE_CHANNEL, region).catch(() => {});
    },

    async close() {
      batcher?.flushAll();
      if (options.ownsConnection) await redis.quit();
    },
  };
}

/** Everything inspect.lua returns, decoded. */
export interface KeyStateView {
  readonly nowUs: number;
  readonly marker: string;
  readonly recovering: boolean;
  readonly share: number;
  readonly tokens: number;
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly bucketExists: boolean;
  readonly counters: CounterSets;
  /** Raw counter fields (`p|…`, `n|…`, `d|…`) for gossip deltas. */
  readonly counterFields: Record<string, number>;
  /** Staircase entries this region still reserves (`o|`). */
  readonly loansOut: LoanRecord[];
  /** Latest grant per borrower (`g|`), the register gossip ships. */
  readonly granted: LoanRecord[];
  /** Highest-seq loan per lender (`i|`), used or not. */
  readonly loansIn: LoanRecord[];
  /** Highest returned seq per lender (`r|`). */
  readonly returned: Record<string, number>;
  /** In-process leases and RLQS assignments (`q|…`, which also hold `shareUnits`) by id. */
  readonly leases: Record<string, { tokens: number; expiryUs: number; shareUnits?: number }>;
}

export async function inspectKey(scripts: ScriptCaller, a: KeyArgs, region: string): Promise<KeyStateView> {
  const r: InspectReply = await scripts.run("inspect", keyHeadArgs(a, region));
  const counterFields: Record<string, number> = {};
  for (const [f, v] of r.counters) counterFields[f] = Number(v);
  const counters = counterSetsOf(Object.entries(counterFields));
  const loansOut: LoanRecord[] = [];
  const granted: LoanRecord[] = [];
  const loansIn: LoanRecord[] = [];
  const returned: Record<string, number> = {};
  for (const [f, v] of r.loans) {
    const who = f.slice(2);
    if (f.startsWith("o|")) {
      for (const e of v.split(",")) loansOut.push({ lender: region, borrower: who, ...parseLoan(e) });
    } else if (f.startsWith("g|")) granted.push({ lender: region, borrower: who, ...parseLoan(v) });
    else if (f.startsWith("i|")) loansIn.push({ lender: who, borrower: region, ...parseLoan(v) });
    else if (f.startsWith("r|")) returned[who] = Number(v);
  }
  const leases: Record<string, { tokens: number; expiryUs: number; shareUnits?: number }> = {};
  for (const [id, v] of r.leases) {
    // A lease is `g:e`; an assignment `g:e:q[:b]` (lua/lib/book.lua).
    const [t, e, q] = v.split(":");
    leases[id] = {
      tokens: Number(t),
      expiryUs: Number(e),
      ...(q !== undefined ? { shareUnits: Number(q) } : {}),
    };
  }
  return {
    nowUs: r.nowUs,
    marker: r.marker,
    recovering: r.recovering,
    share: r.share,
    tokens: r.remaining,
    capacity: r.capacity,
    ratePerSecond: r.ratePerSecond,
    bucketExists: r.bucketExists,
    counters,
    counterFields,
    loansOut,
    granted,
    loansIn,
    returned,
    leases,
  };
}
