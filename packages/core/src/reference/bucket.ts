// Rate-algorithm bucket operations shared by every script that touches `P:b`:
// load (create or discard per DESIGN §4), settle, store. Mirrors lua/lib/bucket.lua, whose piecewise
// refill (settle) is here too, below.
import { leaseHoldEndUs, newIncarnation, parseMarker, recoveryEndUs } from "./core.js";
import { refundBarrier, refundNote, refundNoteLow } from "./refunds.js";
import { buildSchedule, type Schedule, type SchedulePoint, type ShareInputs } from "./schedule.js";
import type { KeyState, RegionState } from "./state.js";
import {
  bucketVersion,
  type KeyLimit,
  leaseHold,
  SHARE_UNITS,
  type Timing,
  US_PER_SECOND,
} from "../types.js";

/**
 * The stored fingerprint is this policy's, with or without the leased-mode
 * flag (lua/lib/bucket.lua same_policy): a limiter and a daemon that disagree about
 * leased mode must not empty the bucket at every call. The flag only shapes
 * the recovery part of the schedule; turning leased mode on leaves no
 * forgotten leases behind (there were none), turning it off stays conservative.
 */
function samePolicy(stored: string, pv: string): boolean {
  return stored === pv || `${stored}:L` === pv || stored === `${pv}:L`;
}

/** Reads the marker, creating a new incarnation born now when it is missing. */
export function ensureMarker(region: RegionState, nowUs: number): string {
  if (region.marker === undefined) region.marker = newIncarnation(nowUs);
  return region.marker;
}

export function shareInputs(key: KeyState, limit: KeyLimit, timing: Timing, marker: string): ShareInputs {
  const born = parseMarker(marker).bornUs;
  return {
    baseShare: limit.baseShare,
    floorShare: limit.floorShare,
    recoveryEndUs: recoveryEndUs(born, timing),
    holdEndUs: leaseHoldEndUs(born, timing, leaseHold(limit, timing)),
    epsilonUs: timing.epsilonUs,
    book: key.book,
  };
}

/** A bucket settled to now, ready for a decision. */
export interface LiveBucket {
  tokens: number;
  tsUs: number;
  schedule: Schedule;
  readonly marker: string;
  /** The fingerprint it is stored under (types.ts bucketVersion). */
  readonly pv: string;
  readonly recovering: boolean;
  /** True when the stored hash was missing or discarded (a write must store everything). */
  readonly rebuilt: boolean;
  /**
   * Discarded for another policy (same incarnation): it restarts empty, so a
   * check stores it even on a denial, or it would never refill.
   */
  readonly restarted: boolean;
  /** Headroom suffix minima for refunds (refunds.ts), updated by every observation. */
  refunds: number[];
}

export function scheduleFor(key: KeyState, limit: KeyLimit, timing: Timing, marker: string, nowUs: number) {
  return buildSchedule(shareInputs(key, limit, timing, marker), [...key.leases.values()], nowUs);
}

/**
 * The level a stored bucket of another policy carries over when the algorithm
 * is the same (DESIGN §3: raising a customer's limit must not empty its
 * bucket): settled to `nowUs` under its own policy (C and r from its
 * fingerprint, its own share schedule), as lua/lib/bucket.lua carried_level.
 * Undefined for another algorithm (the bucket restarts empty).
 */
function carriedLevel(
  b: NonNullable<KeyState["bucket"]>,
  limit: KeyLimit,
  nowUs: number,
): number | undefined {
  const [alg, c, r] = b.pv.split(":");
  if (alg !== limit.algorithm || c === undefined || r === undefined) return undefined;
  const C = Number(c);
  const R = Number(r);
  const sc = b.schedule;
  const tokens =
    limit.algorithm === "gcra"
      ? tokensFromTat(b.value, b.tsUs, capacityOf(C, sc.share, sc.outstanding), rateOf(R, sc.share))
      : b.value;
  return settle(tokens, b.tsUs, sc, C, R, nowUs).tokens;
}

/**
 * Loads `P:b` and settles it to `nowUs`. A missing bucket, or one of another
 * incarnation, is created now: empty before recoveryEnd + C/r (it may have
 * been empty before the state loss), full after. A bucket of another policy
 * keeps its level (settled under the old policy, clamped to the new capacity)
 * when the algorithm is the same, and restarts empty under another algorithm
 * (its tokens were counted in other units); a check stores it even on a
 * denial, so it refills under the new policy from then on (a key never denies
 * forever after a policy change).
 */
export function loadBucket(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  nowUs: number,
): LiveBucket {
  const marker = ensureMarker(region, nowUs);
  const recEnd = recoveryEndUs(parseMarker(marker).bornUs, timing);
  const recovering = nowUs < recEnd;
  const b = key.bucket;
  const pv = bucketVersion(limit, timing);
  const C = limit.capacity;
  const R = limit.refillPerSecond;
  if (b !== undefined && b.inc === marker && samePolicy(b.pv, pv)) {
    const sc = b.schedule;
    const tokens =
      limit.algorithm === "gcra"
        ? tokensFromTat(b.value, b.tsUs, capacityOf(C, sc.share, sc.outstanding), rateOf(R, sc.share))
        : b.value;
    const refunds = [...b.refunds];
    const s = settle(tokens, b.tsUs, sc, C, R, nowUs, (at, h) => refundNote(refunds, at, h));
    refundNote(refunds, s.tsUs - 1, capacityOf(C, s.schedule.share, s.schedule.outstanding) - s.tokens);
    return {
      tokens: s.tokens,
      tsUs: s.tsUs,
      schedule: s.schedule,
      marker,
      pv: b.pv, // kept until a rebuild, as lua/lib/bucket.lua store_bucket does
      recovering,
      rebuilt: false,
      restarted: false,
      refunds,
    };
  }
  const schedule = scheduleFor(key, limit, timing, marker, nowUs);
  let tokens = 0;
  const samePolicyMissing = b === undefined || b.inc !== marker;
  if (samePolicyMissing && nowUs >= recEnd + fullRefillUs(C, R)) {
    tokens = capacityOf(C, schedule.share, schedule.outstanding);
  }
  if (b !== undefined && b.inc === marker) {
    const level = carriedLevel(b, limit, nowUs);
    if (level !== undefined) {
      // As the Lua's `if lvl > cap then lvl = cap end` (the same double, signed zeros included).
      const cap = capacityOf(C, schedule.share, schedule.outstanding);
      tokens = level;
      if (tokens > cap) tokens = cap;
    }
  }
  return {
    tokens,
    tsUs: nowUs,
    schedule,
    marker,
    pv,
    recovering,
    rebuilt: true,
    restarted: b?.inc === marker,
    refunds: refundBarrier(nowUs, b?.inc === marker),
  };
}

/** Stores a live bucket back into `P:b` (GCRA as a TAT). */
export function storeBucket(key: KeyState, live: LiveBucket, limit: KeyLimit): void {
  const sc = live.schedule;
  refundNoteLow(live.refunds, live.tsUs, liveCapacity(live, limit) - live.tokens);
  const value =
    limit.algorithm === "gcra"
      ? tatFromTokens(
          live.tokens,
          live.tsUs,
          capacityOf(limit.capacity, sc.share, sc.outstanding),
          rateOf(limit.refillPerSecond, sc.share),
        )
      : live.tokens;
  key.bucket = {
    value,
    tsUs: live.tsUs,
    inc: live.marker,
    pv: live.pv,
    schedule: sc,
    refunds: [...live.refunds],
  };
}

/**
 * After a share or lease change at `nowUs` (the bucket already settled up to
 * now at the old schedule): rebuild the schedule from the records and clamp
 * the tokens to the new capacity (DESIGN §3: tokens never jump up).
 */
export function applyShareChange(
  live: LiveBucket,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  nowUs: number,
): void {
  live.schedule = scheduleFor(key, limit, timing, live.marker, nowUs);
  const cap = capacityOf(limit.capacity, live.schedule.share, live.schedule.outstanding);
  live.tokens = Math.min(cap, live.tokens);
  refundNoteLow(live.refunds, live.tsUs, cap - live.tokens);
}

export function liveCapacity(live: LiveBucket, limit: KeyLimit): number {
  return capacityOf(limit.capacity, live.schedule.share, live.schedule.outstanding);
}

export function liveRate(live: LiveBucket, limit: KeyLimit): number {
  return rateOf(limit.refillPerSecond, live.schedule.share);
}

// ---------------------------------------------------------------- piecewise lazy refill

// Piecewise lazy refill (DESIGN §3, traps 1, 10, 11). Between two settles the
// share (and the leased amount) may change at known instants; each piece is
// refilled at its own rate and clamped to its own capacity:
//   tokens = min(cap_1, tokens + rate_1·(t_c − t_last)); … ; min(cap_n, tokens + rate_n·(now − t_c))
// (the clamp to cap_2 at t_c is implied by the next min, since rate·Δ ≥ 0).
// The arithmetic is written in the same order as lua/lib/bucket.lua so both produce
// the same doubles.

/** Capacity left for tokens in the bucket: C·s/U minus leased tokens (may be < 0: a debt). */
export function capacityOf(capacity: number, share: number, outstanding: number): number {
  return (capacity * share) / SHARE_UNITS - outstanding;
}

/** Refill per second of a slice. */
export function rateOf(refillPerSecond: number, share: number): number {
  return (refillPerSecond * share) / SHARE_UNITS;
}

/** One piece: `tokens` grows at `rate` for (to − from) µs (never negative), then is clamped to `cap`. */
export function refillPiece(tokens: number, fromUs: number, toUs: number, cap: number, rate: number): number {
  const dt = toUs > fromUs ? toUs - fromUs : 0;
  return Math.min(cap, tokens + (rate * dt) / US_PER_SECOND);
}

export interface Settled {
  readonly tokens: number;
  /** Last settle time: never moves backwards (elapsed is clamped ≥ 0). */
  readonly tsUs: number;
  readonly schedule: Schedule;
}

/** Settles `tokens` (last settled at `tsUs`) up to `nowUs` along `schedule`. */
export function settle(
  tokens: number,
  tsUs: number,
  schedule: Schedule,
  capacity: number,
  refillPerSecond: number,
  nowUs: number,
  /** Called with the headroom (capacity − tokens) at the end of each piece before now (refunds.ts). */
  onPieceEnd?: (atUs: number, headroom: number) => void,
): Settled {
  let tk = tokens;
  let ts = tsUs;
  let share = schedule.share;
  let outstanding = schedule.outstanding;
  let i = 0;
  const next = schedule.next;
  for (; i < next.length; i++) {
    const p = next[i] as SchedulePoint;
    if (p.atUs > nowUs) break;
    tk = refillPiece(
      tk,
      ts,
      p.atUs,
      capacityOf(capacity, share, outstanding),
      rateOf(refillPerSecond, share),
    );
    onPieceEnd?.(p.atUs, capacityOf(capacity, share, outstanding) - tk);
    if (p.atUs > ts) ts = p.atUs;
    share = p.share;
    outstanding = p.outstanding;
  }
  tk = refillPiece(tk, ts, nowUs, capacityOf(capacity, share, outstanding), rateOf(refillPerSecond, share));
  if (nowUs > ts) ts = nowUs;
  return { tokens: tk, tsUs: ts, schedule: { share, outstanding, next: next.slice(i) } };
}

/** Full-refill time C/r of any slice (independent of the share), µs; ∞ when r = 0. */
export function fullRefillUs(capacity: number, refillPerSecond: number): number {
  return refillPerSecond > 0 ? (capacity * US_PER_SECOND) / refillPerSecond : Number.POSITIVE_INFINITY;
}

// GCRA stores a theoretical arrival time instead of tokens. Within one piece
// (constant cap and rate) the two views are equivalent:
//   tokens(t) = cap − rate·max(0, tat − t),  tat = t + (cap − tokens)/rate.
// At a breakpoint the TAT is converted to tokens, refilled piecewise like the
// bucket, and converted back with the new piece's rate.

export function tokensFromTat(tatUs: number, atUs: number, cap: number, rate: number): number {
  if (tatUs > atUs) return cap - (rate * (tatUs - atUs)) / US_PER_SECOND;
  return cap;
}

export function tatFromTokens(tokens: number, atUs: number, cap: number, rate: number): number {
  if (rate > 0) return atUs + ((cap - tokens) * US_PER_SECOND) / rate;
  return atUs;
}
