// The per-key record of the replicated map: everything geoquota gossips about
// one (tenant, resource). Mutators return a record-shaped delta holding only
// what changed; apply it with mergeInto.
import type { Result } from "./errors.js";
import { GCounter } from "./gcounter.js";
import { type Loan, type LoanConflict, LoanRegister, type ReturnedMark, ReturnedRegister } from "./loans.js";
import { PNCounter } from "./pncounter.js";

export interface KeyRecord {
  /** Admitted (p) and refunded/returned (n) cost per replica. */
  consumed: PNCounter;
  /** Denied cost per replica. */
  denied: GCounter;
  loans: LoanRegister;
  returned: ReturnedRegister;
}

function initial(): KeyRecord {
  return { consumed: PNCounter.initial(), denied: new Map(), loans: new Map(), returned: new Map() };
}

function isEmpty(r: KeyRecord): boolean {
  return (
    r.consumed.p.size === 0 &&
    r.consumed.n.size === 0 &&
    r.denied.size === 0 &&
    r.loans.size === 0 &&
    r.returned.size === 0
  );
}

function withConsumed(consumed: PNCounter): KeyRecord {
  return { consumed, denied: new Map(), loans: new Map(), returned: new Map() };
}

/** Delta: replica admitted `amount` more. */
function consume(r: KeyRecord, replica: string, amount: number): Result<KeyRecord> {
  const d = PNCounter.increment(r.consumed, replica, amount);
  return d.ok ? { ok: true, value: withConsumed(d.value) } : d;
}

/** Delta: replica refunded (or returned) `amount`. */
function refund(r: KeyRecord, replica: string, amount: number): Result<KeyRecord> {
  const d = PNCounter.decrement(r.consumed, replica, amount);
  return d.ok ? { ok: true, value: withConsumed(d.value) } : d;
}

/** Delta: replica denied `amount`. */
function deny(r: KeyRecord, replica: string, amount: number): Result<KeyRecord> {
  const d = GCounter.increment(r.denied, replica, amount);
  return d.ok ? { ok: true, value: { ...initial(), denied: d.value } } : d;
}

/** Delta: the lender grants or renews a loan. */
function grantLoan(r: KeyRecord, loan: Loan): Result<KeyRecord> {
  const d = LoanRegister.grant(r.loans, loan);
  return d.ok ? { ok: true, value: { ...initial(), loans: d.value } } : d;
}

/** Delta: the borrower returned lender's loan `seq` early. */
function returnLoan(r: KeyRecord, mark: ReturnedMark): Result<KeyRecord> {
  const d = ReturnedRegister.markReturned(r.returned, mark);
  return d.ok ? { ok: true, value: { ...initial(), returned: d.value } } : d;
}

/**
 * Merges src into target in place; true if target changed. With `delta`, every entry that
 * changed target is also set there: afterwards old target ⊔ delta = new target, and delta holds
 * nothing else (what to ship onwards instead of all of src).
 */
function mergeInto(
  target: KeyRecord,
  src: KeyRecord,
  conflicts?: LoanConflict[],
  delta?: KeyRecord,
): boolean {
  // Non-short-circuit: every part must be merged.
  const a = PNCounter.mergeInto(target.consumed, src.consumed, delta?.consumed);
  const b = GCounter.mergeInto(target.denied, src.denied, delta?.denied);
  const c = LoanRegister.mergeInto(target.loans, src.loans, conflicts, delta?.loans);
  const d = ReturnedRegister.mergeInto(target.returned, src.returned, delta?.returned);
  return a || b || c || d;
}

function copy(r: KeyRecord): KeyRecord {
  return {
    consumed: { p: new Map(r.consumed.p), n: new Map(r.consumed.n) },
    denied: new Map(r.denied),
    loans: new Map(r.loans),
    returned: new Map(r.returned),
  };
}

function join(a: KeyRecord, b: KeyRecord, conflicts?: LoanConflict[]): KeyRecord {
  const out = copy(a);
  mergeInto(out, b, conflicts);
  return out;
}

function leq(a: KeyRecord, b: KeyRecord): boolean {
  return (
    PNCounter.leq(a.consumed, b.consumed) &&
    GCounter.leq(a.denied, b.denied) &&
    LoanRegister.leq(a.loans, b.loans) &&
    ReturnedRegister.leq(a.returned, b.returned)
  );
}

function equals(a: KeyRecord, b: KeyRecord): boolean {
  return (
    PNCounter.equals(a.consumed, b.consumed) &&
    GCounter.equals(a.denied, b.denied) &&
    LoanRegister.equals(a.loans, b.loans) &&
    ReturnedRegister.equals(a.returned, b.returned)
  );
}

/** Number of counter, loan and return entries (what a full-record frame carries). */
function entryCount(r: KeyRecord): number {
  return r.consumed.p.size + r.consumed.n.size + r.denied.size + r.loans.size + r.returned.size;
}

export const KeyRecord = {
  initial,
  isEmpty,
  consume,
  refund,
  deny,
  grantLoan,
  returnLoan,
  join,
  mergeInto,
  copy,
  leq,
  equals,
  entryCount,
} as const;
