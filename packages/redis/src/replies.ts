// Each script's reply, decoded in one place into a named interface: the
// layouts are the `-- Returns:` lines of lua/*.lua. Scripts return floats as
// %.17g strings (Redis would truncate Lua numbers to integers) and times as
// integers; a reply of another shape is GQ_ERR_SCRIPT_REPLY. Callers read
// fields by name (ScriptCaller.call returns the decoded reply), never by
// position.
import { num, pairs, str } from "./decode.js";
import { RedisStoreError } from "./errors.js";
import type { ScriptName } from "./specs.js";

/** One decision of check.lua, refund.lua or one item of check_compound.lua. */
export interface DecisionReply {
  readonly allowed: boolean;
  /** Tokens (rate algorithms, may be < 0 under a lease debt) or admissible cost (windows) after the decision. */
  readonly remaining: number;
  /** The share used, ppm. */
  readonly share: number;
  /** Tokens held by in-process leases (rate algorithms). */
  readonly leased: number;
  readonly recovering: boolean;
  /** Windows: µs until the window admits again. */
  readonly resetUs: number;
}

/** check.lua. */
export interface CheckReply extends DecisionReply {
  readonly nowUs: number;
}

/** refund.lua: `status` 1 refunded (then `decision`), −1 used, −2 expired, −3 lost. */
export interface RefundReply {
  readonly status: number;
  readonly nowUs: number;
  /** The key's state after the call, in check.lua's layout (`allowed` is the status field, 1 when refunded). */
  readonly decision: DecisionReply;
}

/** check_compound.lua. */
export interface CompoundReply {
  readonly allowed: boolean;
  /** Index of the first failing item (0-based), −1 when allowed. */
  readonly failedIndex: number;
  readonly nowUs: number;
  readonly parts: readonly DecisionReply[];
}

/** lease_acquire.lua. */
export interface LeaseAcquireReply {
  readonly granted: number;
  readonly expiryUs: number;
  readonly nowUs: number;
  /** What went back to the bucket for each released lease, in order. */
  readonly returned: readonly number[];
}

/** assign_reserve.lua (RLQS): what was reserved; burst 0, rate 0, ttl 0 when nothing was. */
export interface AssignReserveReply {
  readonly burst: number;
  /** Tokens per second. */
  readonly rate: number;
  /** The TTL to send: the reservation ends at expiryUs = nowUs + ttlUs + the delivery margin. */
  readonly ttlUs: number;
  readonly expiryUs: number;
  readonly nowUs: number;
  /** The region's share of the key (ppm) before the reservation: its bucket's plus assignments'. */
  readonly shareUnits: number;
}

/** assign_usage.lua (RLQS): the report was counted at nowUs. */
export interface AssignUsageReply {
  readonly nowUs: number;
}

/** lease_release.lua. */
export interface LeaseReleaseReply {
  readonly returned: number;
  readonly nowUs: number;
}

export type LoanRefusal = "recovering" | "algorithm" | "units" | "floor" | "leased" | "self";

/** loan_grant.lua. */
export type LoanGrantReply =
  | {
      readonly ok: true;
      readonly units: number;
      readonly deadlineUs: number;
      readonly seq: number;
      readonly nowUs: number;
    }
  | { readonly ok: false; readonly reason: LoanRefusal; readonly nowUs: number };

/** loan_merge.lua. */
export interface LoanMergeReply {
  readonly loansChanged: number;
  readonly countersChanged: number;
  readonly nowUs: number;
}

/** loan_return.lua: `seq` 0 when nothing was returned (then `reason` may say why). */
export interface LoanReturnReply {
  readonly seq: number;
  readonly nowUs: number;
  readonly reason: string;
}

/** loan_return_received.lua. */
export interface LoanReturnReceivedReply {
  readonly dropped: number;
  readonly nowUs: number;
}

/** inspect.lua (read-only; hash fields undecoded: store.ts inspectKey reads them). */
export interface InspectReply {
  readonly nowUs: number;
  readonly marker: string;
  readonly recovering: boolean;
  readonly share: number;
  readonly remaining: number;
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly bucketExists: boolean;
  readonly resetUs: number;
  /** P:c as [field, value] pairs. */
  readonly counters: readonly [string, string][];
  /** P:l as [field, value] pairs. */
  readonly loans: readonly [string, string][];
  /** P:k as [leaseId, `tokens:expiryUs`] pairs. */
  readonly leases: readonly [string, string][];
}

/** reset.lua: what the key could admit in this region just before and after. */
export interface ResetReply {
  readonly before: number;
  readonly after: number;
  readonly share: number;
  readonly nowUs: number;
}

/** drain_dirty.lua. */
export interface DrainDirtyReply {
  readonly nowUs: number;
  /** Change-feed members (`tenant|resource`). */
  readonly members: readonly string[];
}

/** region_init.lua. */
export interface RegionInitReply {
  readonly marker: string;
  readonly nowUs: number;
  readonly changed: boolean;
}

export interface ScriptReplies {
  readonly check: CheckReply;
  readonly refund: RefundReply;
  readonly checkCompound: CompoundReply;
  /** check_batch.lua: each item's check.lua reply, in order. */
  readonly checkBatch: readonly CheckReply[];
  readonly leaseAcquire: LeaseAcquireReply;
  readonly leaseRelease: LeaseReleaseReply;
  readonly assignReserve: AssignReserveReply;
  readonly assignUsage: AssignUsageReply;
  readonly loanGrant: LoanGrantReply;
  readonly loanMerge: LoanMergeReply;
  readonly loanReturn: LoanReturnReply;
  readonly loanReturnReceived: LoanReturnReceivedReply;
  readonly inspect: InspectReply;
  readonly reset: ResetReply;
  readonly drainDirty: DrainDirtyReply;
  readonly regionInit: RegionInitReply;
}

const LOAN_REFUSALS: readonly string[] = ["recovering", "algorithm", "units", "floor", "leased", "self"];

/** The 6 decision values starting at `off`: allowed, remaining, share, leased, recovering, then `resetAt`. */
function decision(r: readonly unknown[], off: number, resetAt: number): DecisionReply {
  return {
    allowed: num(r[off], "allowed") === 1,
    remaining: num(r[off + 1], "remaining"),
    share: num(r[off + 2], "share"),
    leased: num(r[off + 3], "leased"),
    recovering: num(r[off + 4], "recovering") === 1,
    resetUs: num(r[resetAt], "resetUs"),
  };
}

function list(v: unknown, what: string): readonly string[] {
  if (!Array.isArray(v)) throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", what);
  return v.map((m) => str(m, what));
}

/** check.lua's 7 values at `off` (check_batch.lua: item i at 7i). One literal: the hot path's reply. */
function checkAt(r: readonly unknown[], off: number): CheckReply {
  return {
    allowed: num(r[off], "allowed") === 1,
    remaining: num(r[off + 1], "remaining"),
    share: num(r[off + 2], "share"),
    leased: num(r[off + 3], "leased"),
    recovering: num(r[off + 4], "recovering") === 1,
    resetUs: num(r[off + 6], "resetUs"),
    nowUs: num(r[off + 5], "now"),
  };
}

/** One decoder per script: the reply array (already checked to be an array) → its interface. */
export const DECODERS: { readonly [N in ScriptName]: (r: readonly unknown[]) => ScriptReplies[N] } = {
  check: (r) => checkAt(r, 0),
  checkBatch: (r) => {
    const items = r.length / 7;
    if (!Number.isInteger(items))
      throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `checkBatch: ${r.length} values`);
    const out = new Array<CheckReply>(items);
    for (let i = 0; i < items; i++) out[i] = checkAt(r, 7 * i);
    return out;
  },
  refund: (r) => ({ status: num(r[0], "status"), nowUs: num(r[5], "now"), decision: decision(r, 0, 6) }),
  checkCompound: (r) => {
    const items = (r.length - 3) / 6;
    if (!Number.isInteger(items))
      throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `checkCompound: ${r.length} values`);
    return {
      allowed: num(r[0], "allowed") === 1,
      failedIndex: num(r[1], "failed"),
      nowUs: num(r[2], "now"),
      parts: Array.from({ length: items }, (_, i) => decision(r, 3 + 6 * i, 3 + 6 * i + 5)),
    };
  },
  leaseAcquire: (r) => ({
    granted: num(r[0], "granted"),
    expiryUs: num(r[1], "expiry"),
    nowUs: num(r[2], "now"),
    returned: r.slice(3).map((v) => num(v, "returned")),
  }),
  leaseRelease: (r) => ({ returned: num(r[0], "returned"), nowUs: num(r[1], "now") }),
  assignReserve: (r) => ({
    burst: num(r[0], "burst"),
    rate: num(r[1], "rate"),
    ttlUs: num(r[2], "ttl"),
    expiryUs: num(r[3], "expiry"),
    nowUs: num(r[4], "now"),
    shareUnits: num(r[5], "share"),
  }),
  assignUsage: (r) => ({ nowUs: num(r[0], "now") }),
  loanGrant: (r) => {
    const nowUs = num(r[5], "now");
    if (num(r[0], "ok") === 1) {
      return {
        ok: true,
        units: num(r[2], "units"),
        deadlineUs: num(r[3], "deadline"),
        seq: num(r[4], "seq"),
        nowUs,
      };
    }
    const reason = str(r[1], "reason");
    if (!LOAN_REFUSALS.includes(reason))
      throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `loanGrant reason ${reason}`);
    return { ok: false, reason: reason as LoanRefusal, nowUs };
  },
  loanMerge: (r) => ({
    loansChanged: num(r[0], "loans"),
    countersChanged: num(r[1], "counters"),
    nowUs: num(r[2], "now"),
  }),
  loanReturn: (r) => ({
    seq: num(r[0], "seq"),
    nowUs: num(r[1], "now"),
    reason: r[2] === undefined ? "" : str(r[2], "reason"),
  }),
  loanReturnReceived: (r) => ({ dropped: num(r[0], "dropped"), nowUs: num(r[1], "now") }),
  inspect: (r) => ({
    nowUs: num(r[0], "now"),
    marker: str(r[1], "marker"),
    recovering: num(r[2], "recovering") === 1,
    share: num(r[3], "share"),
    remaining: num(r[4], "tokens"),
    capacity: num(r[5], "capacity"),
    ratePerSecond: num(r[6], "rate"),
    bucketExists: num(r[7], "exists") === 1,
    resetUs: num(r[8], "resetUs"),
    counters: pairs(r[9], "counters"),
    loans: pairs(r[10], "loans"),
    leases: pairs(r[11], "leases"),
  }),
  reset: (r) => ({
    before: num(r[0], "before"),
    after: num(r[1], "after"),
    share: num(r[2], "share"),
    nowUs: num(r[3], "now"),
  }),
  drainDirty: (r) => ({ nowUs: num(r[0], "now"), members: Array.isArray(r[1]) ? list(r[1], "member") : [] }),
  regionInit: (r) => ({
    marker: str(r[0], "marker"),
    nowUs: num(r[1], "now"),
    changed: num(r[2], "changed") === 1,
  }),
};
