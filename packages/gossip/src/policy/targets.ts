// Target shares: demand-proportional above the floors, integers summing to U.
// Every region computes the same function of (its view of) the same counters,
// so views that agree give identical targets; views that disagree only make
// lenders lend more or less than ideal (each lends only its own base).
import { SHARE_UNITS } from "@geoquota/core";

/** Share units (ppm): the ground floor's SHARE_UNITS. */
export const U = SHARE_UNITS;

/** A region's static place in a key's policy. */
export interface RegionQuota {
  readonly region: string;
  /** Static base share b_i, ppm (the bases of all regions sum to U). */
  readonly baseShare: number;
  /** Floor, ppm: the region never lends below it and a target is never below it. */
  readonly floorShare: number;
}

export interface TargetOptions {
  /**
   * Hysteresis band, ppm: a new target vector replaces the previous one only
   * if some region's target moved by at least this much (noise → no churn).
   */
  readonly hysteresisPpm: number;
  /**
   * Loans are only worth their churn when some region's demand exceeds what
   * its base slice refills: below `overloadRatio` × its base rate everywhere,
   * targets are the bases (no loans).
   */
  readonly overloadRatio: number;
}

export const DEFAULT_TARGET_OPTIONS: TargetOptions = { hysteresisPpm: 10_000, overloadRatio: 0.9 };

/** Targets when nothing justifies a loan: the static bases (never below the floor). */
export function baseTargets(regions: readonly RegionQuota[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const q of regions) out[q.region] = q.baseShare;
  return out;
}

/**
 * target_i = floor_i + (U − Σ floor) · d_i / Σ d, rounded by largest remainder
 * (ties to the lower region id) so the integers sum to exactly U. With n
 * regions at floor f, a single hot region gets U − (n−1)·f.
 */
export function proportionalTargets(
  regions: readonly RegionQuota[],
  demandPerSec: Readonly<Record<string, number>>,
): Record<string, number> {
  const floors = regions.reduce((s, q) => s + q.floorShare, 0);
  const demands = regions.map((q) => Math.max(0, demandPerSec[q.region] ?? 0));
  const total = demands.reduce((s, d) => s + d, 0);
  if (!(total > 0) || floors > U) return baseTargets(regions);
  const spare = U - floors;
  const exact = demands.map((d) => (spare * d) / total);
  const whole = exact.map((x) => Math.floor(x));
  let left = spare - whole.reduce((s, x) => s + x, 0);
  const order = regions
    .map((q, i) => ({ i, frac: (exact[i] ?? 0) - (whole[i] ?? 0), id: q.region }))
    .sort((a, b) => b.frac - a.frac || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const o of order) {
    if (left <= 0) break;
    whole[o.i] = (whole[o.i] ?? 0) + 1;
    left--;
  }
  const out: Record<string, number> = {};
  regions.forEach((q, i) => {
    out[q.region] = q.floorShare + (whole[i] ?? 0);
  });
  return out;
}

/** True when some region's demand exceeds overloadRatio × the rate of its base slice. */
export function anyOverloaded(
  regions: readonly RegionQuota[],
  demandPerSec: Readonly<Record<string, number>>,
  refillPerSecond: number,
  overloadRatio: number,
): boolean {
  return regions.some(
    (q) => (demandPerSec[q.region] ?? 0) > (overloadRatio * refillPerSecond * q.baseShare) / U,
  );
}

/**
 * The target vector for this round. `previous` is last round's output (or
 * undefined after a daemon restart); it is kept unless some entry moved by at
 * least the hysteresis band, or the region set changed.
 */
export function computeTargets(
  regions: readonly RegionQuota[],
  demandPerSec: Readonly<Record<string, number>>,
  refillPerSecond: number,
  previous: Readonly<Record<string, number>> | undefined,
  opts: TargetOptions = DEFAULT_TARGET_OPTIONS,
): Record<string, number> {
  const next = anyOverloaded(regions, demandPerSec, refillPerSecond, opts.overloadRatio)
    ? proportionalTargets(regions, demandPerSec)
    : baseTargets(regions);
  if (previous === undefined) return next;
  let moved = false;
  for (const q of regions) {
    const p = previous[q.region];
    const n = next[q.region] ?? 0;
    if (p === undefined || Math.abs(n - p) >= opts.hysteresisPpm) moved = true;
  }
  if (!moved && Object.keys(previous).length === regions.length) return { ...previous };
  return next;
}
