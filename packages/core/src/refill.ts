// Piecewise lazy refill (DESIGN §3, traps 1, 10, 11). Between two settles the
// share (and the leased amount) may change at known instants; each piece is
// refilled at its own rate and clamped to its own capacity:
//   tokens = min(cap_1, tokens + rate_1·(t_c − t_last)); … ; min(cap_n, tokens + rate_n·(now − t_c))
// (the clamp to cap_2 at t_c is implied by the next min, since rate·Δ ≥ 0).
// The arithmetic is written in the same order as lua/lib/bucket.lua so both produce
// the same doubles.
import type { Schedule, SchedulePoint } from "./share.js";
import { SHARE_UNITS, US_PER_SECOND } from "./types.js";

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
