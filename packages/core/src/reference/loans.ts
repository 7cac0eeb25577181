// Loan operations (DESIGN §3). Each one that can change the share first settles
// the bucket at the old share up to now (trap 11), then changes the records,
// rebuilds the schedule and clamps the tokens. Mirrors the lua/loan_*.lua scripts.
import { applyShareChange, ensureMarker, loadBucket, shareInputs, storeBucket } from "./bucket.js";
import { parseMarker, recoveryEndUs } from "./core.js";
import { loanOutstanding, pinsHold, reservedAt } from "./schedule.js";
import type { KeyState, RegionState } from "./state.js";
import { isRateAlgorithm, type KeyLimit, type LoanEntry, type Timing } from "../types.js";

export type GrantRefusal = "recovering" | "algorithm" | "units" | "floor" | "leased" | "self";

export type GrantOutcome =
  | { readonly ok: true; readonly loan: LoanEntry; readonly nowUs: number }
  | { readonly ok: false; readonly reason: GrantRefusal; readonly nowUs: number };

/** Drops what can no longer change the share: reservations past deadline + ε, loans past deadline − ε. */
function dropLapsed(key: KeyState, timing: Timing, nowUs: number): void {
  const eps = timing.epsilonUs;
  for (const [borrower, entries] of key.book.outstanding) {
    const kept = entries.filter((e) => loanOutstanding(e, nowUs, eps));
    if (kept.length > 0) key.book.outstanding.set(borrower, kept);
    else key.book.outstanding.delete(borrower);
  }
  for (const [lender, loan] of key.book.received) {
    // A returned loan stays: it carries the deadline that bounds r|'s lifetime.
    if (nowUs >= loan.deadlineUs - eps && loan.seq > (key.book.returned.get(lender) ?? 0)) {
      key.book.received.delete(lender);
    }
  }
}

/** Largest units this region can lend to `borrower` now: only its own base, never below floor (trap 3). */
export function lendable(
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  borrower: string,
  nowUs: number,
): number {
  let others = 0;
  for (const [b, entries] of key.book.outstanding) {
    if (b !== borrower) others += reservedAt(entries, nowUs, timing.epsilonUs);
  }
  return limit.baseShare - others - limit.floorShare;
}

/** Whether the key's leases stay backed (schedule.ts pinsHold) with the loan book as it is now. */
function leasesBacked(
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  marker: string,
  nowUs: number,
): boolean {
  return pinsHold(shareInputs(key, limit, timing, marker), [...key.leases.values()], limit.capacity, nowUs);
}

/**
 * lua/loan_grant.lua (lender). Refused while recovering (it may have
 * forgotten loans), for window algorithms, below the floor, and when the
 * share left would not back this region's outstanding in-process leases at
 * some instant until they expire ("leased"; DESIGN §3: leases pin share).
 * The duration is capped at D (recovery assumes no loan is longer). seq =
 * max(now, last seq + 1): strictly increasing across state loss too.
 */
export function grantLoan(
  region: RegionState,
  self: string,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  borrower: string,
  units: number,
  durationUs: number,
  nowUs: number,
): GrantOutcome {
  const marker = ensureMarker(region, nowUs);
  const dur = Math.min(durationUs, timing.loanDurationUs);
  if (borrower === self) return { ok: false, reason: "self", nowUs };
  if (nowUs < recoveryEndUs(parseMarker(marker).bornUs, timing))
    return { ok: false, reason: "recovering", nowUs };
  if (!isRateAlgorithm(limit.algorithm)) return { ok: false, reason: "algorithm", nowUs };
  if (!(units > 0) || !Number.isInteger(units)) return { ok: false, reason: "units", nowUs };
  const current = reservedAt(key.book.outstanding.get(borrower) ?? [], nowUs, timing.epsilonUs);
  const needed = Math.max(units, current);
  // A refusal writes nothing (the bucket is not even settled).
  if (needed > lendable(key, limit, timing, borrower, nowUs)) return { ok: false, reason: "floor", nowUs };
  // The staircase with the new grant, tried against the leases before anything is written.
  const held = key.book.outstanding.get(borrower);
  key.book.outstanding.set(borrower, [
    ...staircase(held ?? [], units, nowUs + dur),
    { units, deadlineUs: nowUs + dur, seq: 0 },
  ]);
  const backed = leasesBacked(key, limit, timing, marker, nowUs);
  if (held === undefined) key.book.outstanding.delete(borrower);
  else key.book.outstanding.set(borrower, held);
  if (!backed) return { ok: false, reason: "leased", nowUs };
  const live = loadBucket(region, key, limit, timing, nowUs);
  dropLapsed(key, timing, nowUs);
  const seq = nowUs > key.book.lastSeq ? nowUs : key.book.lastSeq + 1;
  const loan: LoanEntry = { units, deadlineUs: nowUs + dur, seq };
  key.book.lastSeq = seq;
  key.book.granted.set(borrower, loan);
  const stair = staircase(key.book.outstanding.get(borrower) ?? [], loan.units, loan.deadlineUs);
  stair.push(loan);
  key.book.outstanding.set(borrower, stair);
  applyShareChange(live, key, limit, timing, nowUs);
  storeBucket(key, live, limit);
  return { ok: true, loan, nowUs };
}

/** The entries a new grant (units, deadline) does not dominate (a dominated one no longer matters). */
function staircase(entries: readonly LoanEntry[], units: number, deadlineUs: number): LoanEntry[] {
  return entries.filter((e) => e.units > units || e.deadlineUs > deadlineUs);
}

export interface ReceivedLoan {
  readonly lender: string;
  readonly loan: LoanEntry;
}

/**
 * lua/loan_merge.lua (borrower): keeps each lender's highest-seq loan,
 * ignoring seqs ≤ the one returned (trap 12); max-merges counter entries.
 * Returns how many loan records changed.
 */
/**
 * The CRDT loan register's join (packages/crdt LoanRegister): a higher seq
 * wins; two different copies with the same seq (a lender that reused a seq)
 * resolve to the smaller (units, deadline), so a borrower never uses more than
 * either copy promised.
 */
export function loanBeats(
  candidate: { units: number; deadlineUs: number; seq: number },
  held: { units: number; deadlineUs: number; seq: number } | undefined,
): boolean {
  if (held === undefined) return candidate.seq > 0;
  if (candidate.seq !== held.seq) return candidate.seq > held.seq;
  if (candidate.units !== held.units) return candidate.units < held.units;
  return candidate.deadlineUs < held.deadlineUs;
}

export function mergeRemote(
  region: RegionState,
  self: string,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  loans: readonly ReceivedLoan[],
  counters: ReadonlyMap<string, number>,
  nowUs: number,
): { changed: number; nowUs: number } {
  for (const [field, v] of counters) {
    if (v > (key.counters.get(field) ?? 0)) key.counters.set(field, v);
  }
  const fresh = loans.filter(
    (l) =>
      l.lender !== self &&
      l.loan.seq > (key.book.returned.get(l.lender) ?? 0) &&
      loanBeats(l.loan, key.book.received.get(l.lender)),
  );
  if (fresh.length === 0) {
    ensureMarker(region, nowUs);
    return { changed: 0, nowUs };
  }
  const rate = isRateAlgorithm(limit.algorithm);
  const live = rate ? loadBucket(region, key, limit, timing, nowUs) : undefined;
  let changed = 0;
  for (const l of fresh) {
    // Two copies in one batch: the same join as the CRDT register.
    if (loanBeats(l.loan, key.book.received.get(l.lender))) {
      key.book.received.set(l.lender, l.loan);
      changed++;
    }
  }
  if (live !== undefined) {
    dropLapsed(key, timing, nowUs);
    applyShareChange(live, key, limit, timing, nowUs);
    storeBucket(key, live, limit);
  } else {
    ensureMarker(region, nowUs);
  }
  return { changed, nowUs };
}

/**
 * lua/loan_return.lua (borrower): stops using the loan from `lender` now
 * (settling first) and remembers its seq, so a late copy is never used again.
 * Refused (`pinned`, nothing written) when the share left would not back the
 * outstanding in-process leases at some instant until they expire (DESIGN
 * §3). Returns the seq to send to the lender (0: nothing was returned).
 */
export function returnLoan(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  lender: string,
  nowUs: number,
): { seq: number; nowUs: number; pinned: boolean } {
  const loan = key.book.received.get(lender);
  const prev = key.book.returned.get(lender) ?? 0;
  const marker = ensureMarker(region, nowUs);
  if (loan === undefined || loan.seq <= prev) return { seq: 0, nowUs, pinned: false };
  // No early return while recovering: the leases clients may still hold on this share are forgotten.
  if (nowUs < recoveryEndUs(parseMarker(marker).bornUs, timing)) return { seq: 0, nowUs, pinned: false };
  if (isRateAlgorithm(limit.algorithm)) {
    const had = key.book.returned.get(lender);
    key.book.returned.set(lender, loan.seq);
    const backed = leasesBacked(key, limit, timing, marker, nowUs);
    if (had === undefined) key.book.returned.delete(lender);
    else key.book.returned.set(lender, had);
    if (!backed) return { seq: 0, nowUs, pinned: true };
  }
  const live = isRateAlgorithm(limit.algorithm) ? loadBucket(region, key, limit, timing, nowUs) : undefined;
  key.book.returned.set(lender, loan.seq);
  if (live !== undefined) {
    applyShareChange(live, key, limit, timing, nowUs);
    storeBucket(key, live, limit);
  }
  return { seq: loan.seq, nowUs, pinned: false };
}

/** lua/loan_return_received.lua (lender): frees the reservation for grants with seq ≤ `seq`. */
export function receiveReturn(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  borrower: string,
  seq: number,
  nowUs: number,
): { dropped: number; nowUs: number } {
  const entries = key.book.outstanding.get(borrower) ?? [];
  const kept = entries.filter((e) => e.seq > seq);
  if (kept.length === entries.length) {
    ensureMarker(region, nowUs);
    return { dropped: 0, nowUs };
  }
  const live = isRateAlgorithm(limit.algorithm) ? loadBucket(region, key, limit, timing, nowUs) : undefined;
  if (kept.length > 0) key.book.outstanding.set(borrower, kept);
  else key.book.outstanding.delete(borrower);
  if (live !== undefined) {
    applyShareChange(live, key, limit, timing, nowUs);
    storeBucket(key, live, limit);
  }
  return { dropped: entries.length - kept.length, nowUs };
}

/** Pruning lapsed records (part of every loan script): settle first, then drop (trap 11). */
export function pruneLoans(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  nowUs: number,
): void {
  const live = isRateAlgorithm(limit.algorithm) ? loadBucket(region, key, limit, timing, nowUs) : undefined;
  dropLapsed(key, timing, nowUs);
  if (live !== undefined) {
    applyShareChange(live, key, limit, timing, nowUs);
    storeBucket(key, live, limit);
  }
}
