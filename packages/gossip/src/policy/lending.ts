// Lending and early-return decisions. A lender decides alone, from its own
// view of the targets, how much of its OWN base to lend to each deficit
// region; a borrower decides alone which loans to hand back. Neither decision
// can break Σ s ≤ U: a loan is carved out of the lender's own base and the
// lender keeps reserving it until deadline + ε whatever the borrower does.
// What views can break is utilization, so the plan is proportional (robust to
// small disagreements) rather than a greedy matching that flips on noise.
import { type RegionQuota, U } from "./targets.js";

export interface LenderState {
  readonly region: string;
  readonly baseShare: number;
  readonly floorShare: number;
  /** In recovery after state loss (DESIGN §4): it may have lent and forgotten, so it lends nothing. */
  readonly recovering: boolean;
  /**
   * Per borrower, units this lender still reserves now: the max over its
   * outstanding grants (`now < deadline + ε`), which a smaller renewal does
   * not lower before the larger grant expires.
   */
  readonly reserved: Readonly<Record<string, number>>;
  /** Per borrower, units of its latest outstanding grant (absent or 0: none). */
  readonly current: Readonly<Record<string, number>>;
}

export interface LendingOptions {
  /** A loan whose desired size moved by less than this is renewed at its current size. */
  readonly hysteresisPpm: number;
  /**
   * A loan whose desired size fell by less than this (and not to nothing) is renewed at its
   * current size. A smaller renewal frees nothing: the lender keeps reserving the larger loan
   * until its deadline + ε while the borrower uses only the smaller one, so a demand estimate's
   * noise that shrinks and regrows loans wastes share for seconds each time (a 90/5/5 split lost
   * 2–3% of r to it; the moved hot spot does not wait on it: its loans are returned early).
   */
  readonly shrinkHysteresisPpm: number;
  /** Loans smaller than this are not worth a grant per round. */
  readonly minLoanPpm: number;
}

export const DEFAULT_LENDING_OPTIONS: LendingOptions = {
  hysteresisPpm: 10_000,
  shrinkHysteresisPpm: 50_000,
  minLoanPpm: 1_000,
};

/** What a region may still lend from its base: base − floor − Σ reserved (borrowed units never count). */
export function lendingHeadroom(self: LenderState): number {
  let reserved = 0;
  for (const v of Object.values(self.reserved)) reserved += Math.max(0, v);
  return Math.max(0, self.baseShare - self.floorShare - reserved);
}

/**
 * The transport plan every region would compute from the same targets:
 * spare_j = b_j − max(floor_j, t_j), deficit_k = t_k − b_k, and lender j gives
 * borrower k  spare_j · (moved / Σ spare) · deficit_k / Σ deficit, floored,
 * with moved = min(Σ spare, Σ deficit).
 */
export function idealLoans(
  lender: RegionQuota,
  regions: readonly RegionQuota[],
  targets: Readonly<Record<string, number>>,
): Record<string, number> {
  const spareOf = (q: RegionQuota): number =>
    Math.max(0, q.baseShare - Math.max(q.floorShare, targets[q.region] ?? q.baseShare));
  const deficitOf = (q: RegionQuota): number => Math.max(0, (targets[q.region] ?? q.baseShare) - q.baseShare);
  let spareSum = 0;
  let deficitSum = 0;
  for (const q of regions) {
    spareSum += spareOf(q);
    deficitSum += deficitOf(q);
  }
  const out: Record<string, number> = {};
  const mine = spareOf(lender);
  if (mine === 0 || spareSum === 0 || deficitSum === 0) return out;
  const moved = Math.min(spareSum, deficitSum);
  for (const q of regions) {
    if (q.region === lender.region) continue;
    const d = deficitOf(q);
    if (d === 0) continue;
    out[q.region] = Math.floor((((mine * moved) / spareSum) * d) / deficitSum);
  }
  return out;
}

/**
 * Desired loan units per borrower for this round (absent or 0: grant nothing,
 * let the loan lapse). The daemon renews every positive entry with
 * deadline = now + D through the store, which takes now from Redis TIME.
 * Never lends while recovering, never beyond base − floor counting what is
 * still reserved (including larger grants a renewal has not yet replaced).
 */
export function planLoans(
  self: LenderState,
  regions: readonly RegionQuota[],
  targets: Readonly<Record<string, number>>,
  opts: LendingOptions = DEFAULT_LENDING_OPTIONS,
): Record<string, number> {
  if (self.recovering) return {};
  const me: RegionQuota = { region: self.region, baseShare: self.baseShare, floorShare: self.floorShare };
  const ideal = idealLoans(me, regions, targets);
  const want: Record<string, number> = {};
  for (const q of regions) {
    if (q.region === self.region) continue;
    let w = ideal[q.region] ?? 0;
    const cur = self.current[q.region] ?? 0;
    if (w > 0 && cur > 0 && Math.abs(w - cur) < opts.hysteresisPpm) w = cur;
    if (w > 0 && cur > w && cur - w < opts.shrinkHysteresisPpm) w = cur;
    if (w < opts.minLoanPpm) continue;
    want[q.region] = w;
  }
  // Budget: after the grants, Σ_k max(reserved_k, want_k) ≤ base − floor.
  // Only growth beyond a reservation costs budget; cut growth pro rata.
  let reservedSum = 0;
  for (const v of Object.values(self.reserved)) reservedSum += Math.max(0, v);
  const headroom = Math.max(0, self.baseShare - self.floorShare - reservedSum);
  let growth = 0;
  for (const [k, w] of Object.entries(want)) growth += Math.max(0, w - (self.reserved[k] ?? 0));
  if (growth > headroom) {
    for (const [k, w] of Object.entries(want)) {
      const r = self.reserved[k] ?? 0;
      if (w <= r) continue;
      const cut = r + Math.floor(((w - r) * headroom) / growth);
      if (cut < opts.minLoanPpm) delete want[k];
      else want[k] = cut;
    }
  }
  return want;
}

export interface InboundLoan {
  readonly lender: string;
  readonly units: number;
  readonly seq: number;
}

export interface BorrowerState {
  readonly region: string;
  readonly baseShare: number;
  /** In recovery its share is at most its floor whatever it holds, so every loan is returned. */
  readonly recovering: boolean;
  /** Loans it uses now (highest seq per lender, before deadline − ε, not returned). */
  readonly inUse: readonly InboundLoan[];
  /**
   * Share (ppm) backing the in-process leases outstanding now, ⌈U·leased/C⌉:
   * pinned until they expire (DESIGN §3), so no return may take the share
   * below it (loan_return.lua refuses such a return anyway; planning it would
   * only waste a call per round).
   */
  readonly leasePinnedPpm?: number | undefined;
}

/**
 * Loans to return early: when the loans in use exceed what the target asks for
 * (target − base) by at least the hysteresis band, hand back loans, largest
 * first, as long as what stays still covers the need. Returning is always
 * safe (the borrower stops using the loan before telling the lender), so this
 * only trades utilization for how fast quota follows a moving hot spot.
 */
export function planReturns(
  self: BorrowerState,
  targets: Readonly<Record<string, number>>,
  opts: Pick<LendingOptions, "hysteresisPpm"> = DEFAULT_LENDING_OPTIONS,
): InboundLoan[] {
  const pinned = self.leasePinnedPpm ?? 0;
  if (self.recovering) return pinned > 0 ? unpinned(self, [...self.inUse], pinned) : [...self.inUse];
  const need = Math.max(0, Math.min(U, targets[self.region] ?? self.baseShare) - self.baseShare);
  let used = 0;
  for (const l of self.inUse) used += l.units;
  if (used - need < opts.hysteresisPpm && need > 0) return [];
  if (used === 0) return [];
  const sorted = [...self.inUse].sort(
    (a, b) => b.units - a.units || (a.lender < b.lender ? -1 : a.lender > b.lender ? 1 : 0),
  );
  const out: InboundLoan[] = [];
  for (const l of sorted) {
    if (used - l.units >= need && self.baseShare + used - l.units >= pinned) {
      out.push(l);
      used -= l.units;
    }
  }
  return out;
}

/** Of `loans` (largest first), those whose return keeps base + what stays in use ≥ the pinned share. */
function unpinned(self: BorrowerState, loans: InboundLoan[], pinned: number): InboundLoan[] {
  let used = 0;
  for (const l of self.inUse) used += l.units;
  const out: InboundLoan[] = [];
  loans.sort((a, b) => b.units - a.units || (a.lender < b.lender ? -1 : a.lender > b.lender ? 1 : 0));
  for (const l of loans) {
    if (self.baseShare + used - l.units < pinned) continue;
    out.push(l);
    used -= l.units;
  }
  return out;
}
