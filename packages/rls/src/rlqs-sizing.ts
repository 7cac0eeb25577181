// How much an RLQS assignment asks for (DESIGN §11, issue 28): sized from the proxy's own demand
// (its usage reports), never from a fixed fraction alone, so several proxies of one region share
// its slice by what they spend and a hot proxy can ask for the whole of it. The reservation
// script fits the ask to what is free (lua/assign_reserve.lua), so an ask is a wish, not a claim:
// what keeps the bound is the script, what keeps the slice used is asking for what is needed.
import { SHARE_UNITS } from "@geoquota/core";

/** The key's limit and this region's base slice of it, in tokens and tokens/s. */
export interface RlqsLimits {
  readonly capacity: number;
  readonly rate: number;
  readonly sliceCapacity: number;
  readonly sliceRate: number;
}

/** One bucket's demand as its proxy reported it: tokens/s asked for (allowed + denied). */
export class DemandEstimate {
  private rate: number | undefined;

  /** Demand so far, or undefined before a report that covered any time. */
  get perSecond(): number | undefined {
    return this.rate;
  }

  /**
   * A report of `allowed + denied` requests over `elapsedUs`. A rise is taken at once (a proxy
   * denying now needs more now); a fall is averaged (one quiet interval does not give away the
   * slice a steady proxy spends).
   */
  observe(requests: number, elapsedUs: number): void {
    if (!(elapsedUs > 0)) return;
    const sample = requests / (elapsedUs / 1e6);
    this.rate = this.rate === undefined || sample >= this.rate ? sample : (this.rate + sample) / 2;
  }
}

/** Headroom over the demand: a proxy whose demand grows between assignments is not denied at once. */
export const RLQS_DEMAND_HEADROOM = 1.25;
/** The least an assignment asks for, as a part of the base slice's rate (a quiet proxy can start). */
export const RLQS_MIN_SLICE_FRACTION = 0.02;

/**
 * The burst of a proxy's local bucket, in seconds of its rate. Small on purpose: while a renewal
 * and the assignment it renews are both live, the proxy may hold both bursts (the old bucket's
 * tokens until the new one arrives, the new one full), so both are reserved; the rate is held
 * once (lua/assign_reserve.lua's supersede). A twentieth of a second of rate leaves a renewal ~0.95
 * of the slice's rate; a burst of a whole second (C = r) would leave it half. The bursts come out of
 * the region's bucket (a proxy's bucket starts full), refilled by what RLQS_ASSIGNED_PART leaves it.
 */
export const RLQS_BURST_SECONDS = 0.05;

export interface RlqsAskSize {
  readonly rate: number;
  readonly burst: number;
}

/**
 * The ask: before any demand is known, `initialFraction` of the base slice; then the demand
 * with headroom, at least RLQS_MIN_SLICE_FRACTION of the base slice and at most the key's whole
 * rate (a region that borrowed may hold more than its base slice; the script caps the ask at
 * the share it holds now). The burst is RLQS_BURST_SECONDS of that rate, within what the rate's
 * share holds of capacity (C·q/U, so it costs no extra tokens), and at least one token: a
 * zero-token bucket admits nothing.
 */
export function askSize(
  l: RlqsLimits,
  demandPerSecond: number | undefined,
  initialFraction: number,
): RlqsAskSize {
  // A bucket that never refills has only its burst to share: ask for a part of the slice's.
  if (!(l.rate > 0)) return { rate: 0, burst: Math.max(0, Math.floor(l.sliceCapacity * initialFraction)) };
  const rate =
    demandPerSecond === undefined
      ? l.sliceRate * initialFraction
      : Math.min(
          l.rate,
          Math.max(l.sliceRate * RLQS_MIN_SLICE_FRACTION, demandPerSecond * RLQS_DEMAND_HEADROOM),
        );
  return { rate, burst: burstOf(l, rate) };
}

const burstOf = (l: RlqsLimits, rate: number): number =>
  Math.max(1, Math.floor(Math.min((rate * l.capacity) / l.rate, rate * RLQS_BURST_SECONDS)));

/**
 * The part of the region's share its proxies' asks divide among them by demand; the rest stays the
 * bucket's, whose refill funds the renewals' bursts (RLQS_BURST_SECONDS of rate, each renewal).
 */
export const RLQS_ASSIGNED_PART = 0.95;

/**
 * The ask of one of several proxies on one key: askSize, capped at its part of the region's share
 * by demand (RLQS_ASSIGNED_PART of the share's rate × its demand / the demand of all the region's
 * proxies on the key), so the first to ask does not take what the others need. `shareUnits`: the
 * region's share as the last reservation saw it (undefined before one). `peers`: the region's
 * proxies on the key, this one included (a first ask is divided by them).
 */
export function fairAskSize(
  l: RlqsLimits,
  demandPerSecond: number | undefined,
  totalDemandPerSecond: number,
  shareUnits: number | undefined,
  initialFraction: number,
  peers = 1,
): RlqsAskSize {
  const a = askSize(l, demandPerSecond, initialFraction);
  if (demandPerSecond === undefined) {
    // A first ask (no demand known): at most its part of RLQS_ASSIGNED_PART of the base slice,
    // divided by the region's proxies on the key, so proxies that start together leave the
    // bucket the refill their renewals' bursts need (else the renewals are refused until the
    // first assignments end, and the proxies deny meanwhile).
    if (!(l.rate > 0)) return a;
    const first = (RLQS_ASSIGNED_PART * l.sliceRate) / Math.max(1, peers);
    if (a.rate <= first) return a;
    const rate = Math.max(first, l.sliceRate * RLQS_MIN_SLICE_FRACTION);
    return { rate, burst: burstOf(l, rate) };
  }
  if (
    demandPerSecond === undefined ||
    shareUnits === undefined ||
    !(totalDemandPerSecond > 0) ||
    !(l.rate > 0)
  )
    return a;
  const part = Math.min(1, demandPerSecond / totalDemandPerSecond);
  const cap = (RLQS_ASSIGNED_PART * l.rate * shareUnits * part) / SHARE_UNITS;
  if (a.rate <= cap) return a;
  const rate = Math.max(cap, l.sliceRate * RLQS_MIN_SLICE_FRACTION);
  return { rate, burst: burstOf(l, rate) };
}

/**
 * Whether a report asks for an assignment before the renewal is due: the proxy denied requests
 * and what it is asking for now is clearly more than it holds (a rise of a tenth or more).
 */
export function wantsMore(denied: number, heldRate: number, askedRate: number): boolean {
  return denied > 0 && askedRate > heldRate * 1.1;
}
