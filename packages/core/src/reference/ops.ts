// The per-key operations, with exactly the semantics of the Lua scripts (each
// function names its script). Every function mutates the `RegionState` and
// `KeyState` it is given and does no I/O: the caller supplies `nowUs`, as the
// script reads it from Redis TIME.
import {
  applyShareChange,
  ensureMarker,
  fullRefillUs,
  type LiveBucket,
  liveCapacity,
  liveRate,
  loadBucket,
  storeBucket,
} from "./bucket.js";
import { counterFieldOf } from "../ids.js";
import { parseMarker, replicaId } from "./core.js";
import { refundErase, refundFloor } from "./refunds.js";
import { assignedAt } from "./schedule.js";
import type { KeyState, RegionState } from "./state.js";
import { type KeyLimit, isRateAlgorithm, SHARE_UNITS, type Timing } from "../types.js";
import { decideWindow, refundWindow } from "./windows.js";

export interface CheckOutcome {
  readonly allowed: boolean;
  /** Rate algorithms: tokens after the decision (may be < 0 under a lease debt); windows: cost still admissible. */
  readonly remaining: number;
  /** The share used, ppm (windows: the base share; 0 while exhausted by recovery). */
  readonly share: number;
  /** Capacity of the slice now (rate: C·s/U − leased; windows: the slice per window). */
  readonly capacity: number;
  /** Refill per second of the slice (windows: 0). */
  readonly ratePerSecond: number;
  /** Windows: µs until the window constraint relaxes; rate algorithms: 0. */
  readonly resetUs: number;
  readonly recovering: boolean;
  readonly nowUs: number;
}

function bump(key: KeyState, field: string, by: number): void {
  key.counters.set(field, (key.counters.get(field) ?? 0) + by);
}

export function counterField(kind: "p" | "n" | "d", region: RegionState, marker: string): string {
  return counterFieldOf(kind, replicaId(region.region, marker));
}

interface Prepared {
  readonly outcome: CheckOutcome;
  readonly commit: () => void;
  /** What a denial writes besides the denied counter. */
  readonly deny: () => void;
  readonly marker: string;
}

function prepare(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  cost: number,
  nowUs: number,
): Prepared {
  if (isRateAlgorithm(limit.algorithm)) {
    const live = loadBucket(region, key, limit, timing, nowUs);
    const allowed = live.tokens >= cost;
    const outcome: CheckOutcome = {
      allowed,
      remaining: allowed ? live.tokens - cost : live.tokens,
      share: live.schedule.share,
      capacity: liveCapacity(live, limit),
      ratePerSecond: liveRate(live, limit),
      resetUs: 0,
      recovering: live.recovering,
      nowUs,
    };
    const commit = () => {
      live.tokens -= cost;
      storeBucket(key, live, limit);
    };
    // A bucket restarted by a policy change is stored on a denial too:
    // otherwise it is rebuilt empty at every check and never refills.
    const deny = () => {
      if (live.restarted) storeBucket(key, live, limit);
    };
    return { outcome, commit, deny, marker: live.marker };
  }
  const w = decideWindow(region, key, limit, timing, cost, nowUs);
  const outcome: CheckOutcome = {
    allowed: w.allowed,
    remaining: w.remaining,
    share: w.recovering ? 0 : limit.baseShare,
    capacity: w.limit,
    ratePerSecond: 0,
    resetUs: w.resetUs,
    recovering: w.recovering,
    nowUs,
  };
  return { outcome, commit: w.commit, deny: () => {}, marker: region.marker ?? "" };
}

/** lua/check.lua: admit `cost` or deny; a denial changes nothing but the denied counter. */
export function check(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  cost: number,
  nowUs: number,
): CheckOutcome {
  const p = prepare(region, key, limit, timing, cost, nowUs);
  if (p.outcome.allowed) {
    p.commit();
    bump(key, counterField("p", region, p.marker), cost);
  } else {
    bump(key, counterField("d", region, p.marker), cost);
    p.deny();
  }
  return p.outcome;
}

export interface CompoundItem {
  readonly key: KeyState;
  readonly limit: KeyLimit;
  readonly cost: number;
}

/** lua/check_compound.lua: all limits admit, or none changes (each denied counter grows). Keys distinct. */
export function checkCompound(
  region: RegionState,
  items: readonly CompoundItem[],
  timing: Timing,
  nowUs: number,
): { allowed: boolean; parts: CheckOutcome[]; failedIndex: number } {
  const prepared = items.map((it) => prepare(region, it.key, it.limit, timing, it.cost, nowUs));
  const failedIndex = prepared.findIndex((p) => !p.outcome.allowed);
  const allowed = failedIndex < 0;
  prepared.forEach((p, i) => {
    const it = items[i] as CompoundItem;
    if (allowed) {
      p.commit();
      bump(it.key, counterField("p", region, p.marker), it.cost);
    } else {
      bump(it.key, counterField("d", region, p.marker), it.cost);
      p.deny();
    }
  });
  return { allowed, parts: prepared.map((p) => p.outcome), failedIndex };
}

/**
 * lua/refund.lua: erases the admission of `cost` made at `admittedUs` (DESIGN §7). Rate
 * algorithms get back only what it still keeps out of the bucket (refunds.ts): min(cost,
 * headroom now, the smallest headroom seen since it); windows: windows.ts refundWindow.
 */
export function refund(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  cost: number,
  admittedUs: number,
  nowUs: number,
): CheckOutcome {
  if (isRateAlgorithm(limit.algorithm)) {
    const live = loadBucket(region, key, limit, timing, nowUs);
    const cap = liveCapacity(live, limit);
    const credit = Math.min(cost, cap - live.tokens, refundFloor(live.refunds, admittedUs));
    if (credit > 0) live.tokens = Math.min(cap, live.tokens + credit);
    live.refunds = refundErase(live.refunds, admittedUs, cost);
    storeBucket(key, live, limit);
    bump(key, counterField("n", region, live.marker), cost);
    return {
      allowed: true,
      remaining: live.tokens,
      share: live.schedule.share,
      capacity: liveCapacity(live, limit),
      ratePerSecond: liveRate(live, limit),
      resetUs: 0,
      recovering: live.recovering,
      nowUs,
    };
  }
  refundWindow(region, key, limit, cost, admittedUs, nowUs);
  bump(key, counterField("n", region, ensureMarker(region, nowUs)), cost);
  return { ...peek(region, key, limit, timing, nowUs), allowed: true };
}

/** lua/inspect.lua's decision part: the state settled to now, nothing written (cost 0). */
export function peek(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  nowUs: number,
): CheckOutcome {
  return prepare(region, key, limit, timing, 0, nowUs).outcome;
}

export interface LeaseOutcome {
  readonly granted: number;
  readonly expiryUs: number;
  readonly nowUs: number;
}

/**
 * lua/lease_acquire.lua (token bucket only): takes up to `tokens` (whole
 * tokens, at most ⌊bucket⌋) out of the bucket. They stay counted against the
 * capacity (tokens + outstanding ≤ capacity) until released or expired; an
 * expired lease counts as used. The duration is capped at D, and at the
 * first instant of the share schedule where the share would not back the
 * lease (schedule.ts pinsHold): the reply's expiry says what was granted.
 */
export function acquireLease(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  leaseId: string,
  tokens: number,
  durationUs: number,
  nowUs: number,
): LeaseOutcome {
  const live = loadBucket(region, key, limit, timing, nowUs);
  let granted = Math.min(tokens, Math.floor(live.tokens));
  if (granted < 0 || key.leases.has(leaseId)) granted = 0;
  let expiryUs = nowUs + Math.min(durationUs, timing.loanDurationUs);
  if (granted > 0) {
    // Leases pin share (DESIGN §3): the lease ends at the first later change
    // of the schedule where the share would no longer back it (e.g. a loan
    // passing deadline − ε), so a lapse never strands leased tokens.
    for (const p of live.schedule.next) {
      if (p.atUs >= expiryUs) break;
      if (p.atUs > nowUs && (limit.capacity * p.share) / SHARE_UNITS - p.outstanding - granted < 0) {
        expiryUs = p.atUs;
        break;
      }
    }
    live.tokens -= granted;
    key.leases.set(leaseId, { tokens: granted, expiryUs });
    bump(key, counterField("p", region, live.marker), granted);
  }
  // What a lease request could not get is unmet demand, like a denied check:
  // without it a region whose clients all lease looks no busier than what it
  // already holds, and re-weighting cannot tell it wants more.
  if (tokens > granted) bump(key, counterField("d", region, live.marker), tokens - granted);
  pruneLeases(key, nowUs);
  applyShareChange(live, key, limit, timing, nowUs);
  storeBucket(key, live, limit);
  return { granted, expiryUs, nowUs };
}

function pruneLeases(key: KeyState, nowUs: number): void {
  for (const [id, l] of key.leases) if (nowUs >= l.expiryUs) key.leases.delete(id);
}

/** lua/lease_release.lua: `used` of the lease is consumed, the rest goes back (not after expiry). */
export function releaseLease(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  leaseId: string,
  used: number,
  nowUs: number,
): { returned: number; nowUs: number } {
  const live = loadBucket(region, key, limit, timing, nowUs);
  const lease = key.leases.get(leaseId);
  let returned = 0;
  // An assignment is never released underneath (DESIGN §11): the proxy may still spend it.
  if (lease?.shareUnits !== undefined) {
    storeBucket(key, live, limit);
    return { returned, nowUs };
  }
  if (lease !== undefined && nowUs < lease.expiryUs) {
    const u = used < 0 ? 0 : Math.min(used, lease.tokens);
    returned = lease.tokens - u;
    live.tokens += returned;
    if (returned > 0) bump(key, counterField("n", region, live.marker), returned);
  }
  key.leases.delete(leaseId);
  pruneLeases(key, nowUs);
  applyShareChange(live, key, limit, timing, nowUs);
  storeBucket(key, live, limit);
  return { returned, nowUs };
}

/**
 * lua/lease_acquire.lua with releases: each listed lease released as
 * `releaseLease` would, in order, then `acquireLease` (tokens may be 0), all
 * at the same `nowUs` (one script, one TIME).
 */
export function renewLease(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  releases: readonly { readonly leaseId: string; readonly used: number }[],
  leaseId: string,
  tokens: number,
  durationUs: number,
  nowUs: number,
): LeaseOutcome & { readonly returned: number[] } {
  const returned = releases.map(
    (r) => releaseLease(region, key, limit, timing, r.leaseId, r.used, nowUs).returned,
  );
  return { ...acquireLease(region, key, limit, timing, leaseId, tokens, durationUs, nowUs), returned };
}

export interface AssignOutcome {
  /** Tokens the proxy's bucket holds at receipt (it starts full). */
  readonly burst: number;
  /** Tokens per second. */
  readonly rate: number;
  /** The TTL to send; 0 when nothing was reserved. */
  readonly ttlUs: number;
  /** End of the reservation: nowUs + ttlUs + marginUs (counted until then). */
  readonly expiryUs: number;
  /** The region's share of the key at nowUs before the reservation (its bucket's + assignments'). */
  readonly shareUnits: number;
  readonly nowUs: number;
}

/**
 * lua/assign_reserve.lua (token bucket only): reserves a quota assignment for
 * an RLQS proxy (DESIGN §11) from now (the send) until now + ttl + the
 * delivery margin, capped at D and cut to the share schedule. The rate is held
 * as q ≤ ⌈rate·U/R⌉ ppm of share (with its capacity C·q/U), the burst beyond
 * C·q/U as leased tokens; the burst leaves the bucket now. What fits is
 * reserved: the largest share first, then the largest burst beside it, each
 * fitted to now and to the schedule points a cut may not reach (up to now +
 * margin, and before the superseded record's expiry); later drops cut the
 * expiry. `supersedes` ("" for none) names the live assignment this one
 * renews: min(q_old, q) of its share moves to the new record and its leased
 * tokens grow to back its own burst. Nothing is counted: the proxy's usage
 * reports are the admissions.
 */
export function reserveAssignment(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  assignmentId: string,
  burst: number,
  rate: number,
  ttlUs: number,
  marginUs: number,
  nowUs: number,
  supersedes = "",
): AssignOutcome {
  const live = loadBucket(region, key, limit, timing, nowUs);
  const id = `q|${assignmentId}`;
  const shareUnits = live.schedule.share + assignedAt(key.leases.values(), nowUs);
  const C = limit.capacity;
  const R = limit.refillPerSecond;
  const U = SHARE_UNITS;
  let expiryUs = nowUs + Math.min(ttlUs + marginUs, timing.loanDurationUs);
  const oid = `q|${supersedes}`;
  const held = supersedes !== "" && oid !== id ? key.leases.get(oid) : undefined;
  const old =
    held?.shareUnits !== undefined && held.expiryUs > nowUs && held.expiryUs <= expiryUs
      ? { ...held, shareUnits: held.shareUnits }
      : undefined;
  const moved = (q: number): [number, number] => {
    if (old === undefined) return [0, 0];
    const m = Math.min(old.shareUnits, q);
    let og =
      old.burst !== undefined
        ? Math.ceil(Math.max(0, old.burst - (C * (old.shareUnits - m)) / U))
        : old.tokens + Math.ceil((C * m) / U);
    if (og < old.tokens) og = old.tokens;
    return [m, og - old.tokens];
  };
  const fits = (t: number, s: number, o: number, q: number, g: number): boolean => {
    const [m, dg] = old !== undefined && t < old.expiryUs ? moved(q) : [0, 0];
    return s + m - q >= 0 && (C * (s + m - q)) / U - o - dg - g >= 0;
  };
  const sched = live.schedule;
  const fitsSized = (q: number, g: number): boolean => {
    if (!fits(nowUs, sched.share, sched.outstanding, q, g)) return false;
    for (const p of sched.next) {
      if (p.atUs >= expiryUs) break;
      const sized = p.atUs <= nowUs + marginUs || (old !== undefined && p.atUs < old.expiryUs);
      if (p.atUs > nowUs && sized && !fits(p.atUs, p.share, p.outstanding, q, g)) return false;
    }
    return true;
  };
  const wq = rate > 0 && R > 0 ? Math.min(Math.ceil((rate * U) / R), U) : 0;
  const q = largest(wq, (x) => fitsSized(x, 0));
  let b = 0;
  let g = 0;
  if (q >= 0) {
    const bmax = Math.max(0, Math.min(burst, Math.floor(live.tokens)));
    // Whole tokens: leased amounts are integers (check.lua's fast path replies them as Redis integers).
    const gOf = (x: number) => Math.ceil(Math.max(0, x - (C * q) / U));
    b = largest(bmax, (x) => fitsSized(q, gOf(x)));
    g = gOf(b);
  }
  // A token bucket of max_tokens 0 admits nothing, whatever its rate: refused.
  let ok = !key.leases.has(id) && b > 0;
  if (ok) {
    for (const p of sched.next) {
      if (p.atUs >= expiryUs) break;
      if (p.atUs > nowUs && !fits(p.atUs, p.share, p.outstanding, q, g)) {
        expiryUs = p.atUs;
        break;
      }
    }
    ok = expiryUs - marginUs > nowUs;
  }
  if (!ok) {
    storeBucket(key, live, limit);
    return { burst: 0, rate: 0, ttlUs: 0, expiryUs: nowUs, nowUs, shareUnits };
  }
  const granted = Math.min(rate, (R * q) / U);
  live.tokens -= b;
  if (old !== undefined) {
    const [m, dg] = moved(q);
    key.leases.set(oid, { ...old, tokens: old.tokens + dg, shareUnits: old.shareUnits - m });
  }
  key.leases.set(id, { tokens: g, expiryUs, shareUnits: q, burst: b });
  applyShareChange(live, key, limit, timing, nowUs);
  storeBucket(key, live, limit);
  return { burst: b, rate: granted, ttlUs: expiryUs - marginUs - nowUs, expiryUs, nowUs, shareUnits };
}

/** Largest n in [0, hi] with ok(n) (ok true up to some n, then false); −1 when not even 0. */
function largest(hi: number, ok: (n: number) => boolean): number {
  if (!ok(0)) return -1;
  let lo = 0;
  let top = hi;
  while (lo < top) {
    const mid = Math.floor((lo + top + 1) / 2);
    if (ok(mid)) lo = mid;
    else top = mid - 1;
  }
  return lo;
}

/** Whether a bucket created now starts empty (DESIGN §4). */
export function startsEmpty(marker: string, limit: KeyLimit, timing: Timing, nowUs: number): boolean {
  const born = parseMarker(marker).bornUs;
  return (
    nowUs <
    born + timing.loanDurationUs + 2 * timing.epsilonUs + fullRefillUs(limit.capacity, limit.refillPerSecond)
  );
}

export type { LiveBucket };
