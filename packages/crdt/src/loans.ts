// The owner-written loan register of DESIGN §3 and the borrower-written
// "returned" register (DESIGN trap 12).
//
// LoanRegister: (lender, borrower) → { units, deadlineUs, seq }, written only
// by the lender. Join keeps the higher seq. Two different loans with the same
// seq can only come from a lender that reused a seq (e.g. state loss without
// the TIME-based seq of §3); join then keeps the lexicographically *smaller*
// (units, deadlineUs) — the conservative choice, a borrower never uses more
// than either copy promised — and reports the conflict to the caller.
//
// ReturnedRegister: (lender, borrower) → highest seq the borrower returned
// early; join is max. A loan copy with seq ≤ that is never used again.
import { err, ok, type Result } from "./errors.js";
import { checkId } from "./ids.js";

/** Share units: parts per million. */
export const U = 1_000_000;

export interface Loan {
  readonly lender: string;
  readonly borrower: string;
  /** Integer ppm of U. */
  readonly units: number;
  /** Lender's Redis TIME, µs. */
  readonly deadlineUs: number;
  readonly seq: number;
}

export interface LoanConflict {
  readonly lender: string;
  readonly borrower: string;
  readonly seq: number;
  readonly kept: Loan;
  readonly discarded: Loan;
}

export interface ReturnedMark {
  readonly lender: string;
  readonly borrower: string;
  readonly seq: number;
}

export type LoanRegister = Map<string, Loan>;
export type ReturnedRegister = Map<string, ReturnedMark>;

/** Map key of a (lender, borrower) pair. `>` is outside the id charset, so the key is unambiguous. */
export function pairKey(lender: string, borrower: string): string {
  return `${lender}>${borrower}`;
}

export function isNonNegativeSafeInt(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

export function isValidUnits(v: unknown): v is number {
  return isNonNegativeSafeInt(v) && v <= U;
}

/** Whether candidate replaces current in the join (higher seq; equal seq: smaller (units, deadline)). */
function beats(candidate: Loan, current: Loan): boolean {
  if (candidate.seq !== current.seq) return candidate.seq > current.seq;
  if (candidate.units !== current.units) return candidate.units < current.units;
  return candidate.deadlineUs < current.deadlineUs;
}

function sameContent(a: Loan, b: Loan): boolean {
  return a.units === b.units && a.deadlineUs === b.deadlineUs && a.seq === b.seq;
}

function loansInitial(): LoanRegister {
  return new Map();
}

/** The lender's delta for a new grant (or renewal) to borrower. */
function grant(
  state: ReadonlyMap<string, Loan>,
  loan: { lender: string; borrower: string; units: number; deadlineUs: number; seq: number },
): Result<LoanRegister> {
  const badId = checkId(loan.lender, "lender") ?? checkId(loan.borrower, "borrower");
  if (badId !== undefined) return { ok: false, error: badId };
  if (!isValidUnits(loan.units))
    return err("GQ_ERR_INVALID_LOAN", `units ${loan.units} not an integer in [0, ${U}]`);
  if (!isNonNegativeSafeInt(loan.deadlineUs) || !isNonNegativeSafeInt(loan.seq)) {
    return err("GQ_ERR_INVALID_LOAN", "deadlineUs and seq must be non-negative safe integers");
  }
  const key = pairKey(loan.lender, loan.borrower);
  const cur = state.get(key);
  if (cur !== undefined && loan.seq <= cur.seq) {
    return err("GQ_ERR_STALE_SEQ", `seq ${loan.seq} for ${key} is not above the current ${cur.seq}`);
  }
  const value: Loan = {
    lender: loan.lender,
    borrower: loan.borrower,
    units: loan.units,
    deadlineUs: loan.deadlineUs,
    seq: loan.seq,
  };
  return ok(new Map([[key, value]]));
}

/**
 * Merges src into target in place. Equal-seq conflicts are pushed to
 * `conflicts` when given (both directions of a merge report the same pair);
 * the registers that changed target also go into `delta` when given.
 */
function loansMergeInto(
  target: LoanRegister,
  src: ReadonlyMap<string, Loan>,
  conflicts?: LoanConflict[],
  delta?: LoanRegister,
): boolean {
  let changed = false;
  for (const [key, loan] of src) {
    const cur = target.get(key);
    if (cur === undefined) {
      target.set(key, loan);
      delta?.set(key, loan);
      changed = true;
      continue;
    }
    if (cur.seq === loan.seq && conflicts !== undefined && !sameContent(cur, loan)) {
      const win = beats(loan, cur);
      conflicts.push({
        lender: loan.lender,
        borrower: loan.borrower,
        seq: loan.seq,
        kept: win ? loan : cur,
        discarded: win ? cur : loan,
      });
    }
    if (beats(loan, cur)) {
      target.set(key, loan);
      delta?.set(key, loan);
      changed = true;
    }
  }
  return changed;
}

function loansJoin(
  a: ReadonlyMap<string, Loan>,
  b: ReadonlyMap<string, Loan>,
  conflicts?: LoanConflict[],
): LoanRegister {
  const out = new Map(a);
  loansMergeInto(out, b, conflicts);
  return out;
}

function loansLeq(a: ReadonlyMap<string, Loan>, b: ReadonlyMap<string, Loan>): boolean {
  for (const [key, loan] of a) {
    const other = b.get(key);
    if (other === undefined || beats(loan, other)) return false;
  }
  return true;
}

function loansEquals(a: ReadonlyMap<string, Loan>, b: ReadonlyMap<string, Loan>): boolean {
  if (a.size !== b.size) return false;
  for (const [key, loan] of a) {
    const other = b.get(key);
    if (other === undefined || !sameContent(loan, other)) return false;
  }
  return true;
}

function loanOf(state: ReadonlyMap<string, Loan>, lender: string, borrower: string): Loan | undefined {
  return state.get(pairKey(lender, borrower));
}

export const LoanRegister = {
  initial: loansInitial,
  grant,
  join: loansJoin,
  mergeInto: loansMergeInto,
  leq: loansLeq,
  equals: loansEquals,
  get: loanOf,
} as const;

function returnedInitial(): ReturnedRegister {
  return new Map();
}

/** The borrower's delta recording that it returned lender's loan `seq` early. */
function markReturned(
  _state: ReadonlyMap<string, ReturnedMark>,
  mark: { lender: string; borrower: string; seq: number },
): Result<ReturnedRegister> {
  const badId = checkId(mark.lender, "lender") ?? checkId(mark.borrower, "borrower");
  if (badId !== undefined) return { ok: false, error: badId };
  if (!isNonNegativeSafeInt(mark.seq))
    return err("GQ_ERR_INVALID_LOAN", "seq must be a non-negative safe integer");
  const value: ReturnedMark = { lender: mark.lender, borrower: mark.borrower, seq: mark.seq };
  return ok(new Map([[pairKey(mark.lender, mark.borrower), value]]));
}

function returnedMergeInto(
  target: ReturnedRegister,
  src: ReadonlyMap<string, ReturnedMark>,
  delta?: ReturnedRegister,
): boolean {
  let changed = false;
  for (const [key, mark] of src) {
    const cur = target.get(key);
    if (cur === undefined || mark.seq > cur.seq) {
      target.set(key, mark);
      delta?.set(key, mark);
      changed = true;
    }
  }
  return changed;
}

function returnedJoin(
  a: ReadonlyMap<string, ReturnedMark>,
  b: ReadonlyMap<string, ReturnedMark>,
): ReturnedRegister {
  const out = new Map(a);
  returnedMergeInto(out, b);
  return out;
}

function returnedLeq(a: ReadonlyMap<string, ReturnedMark>, b: ReadonlyMap<string, ReturnedMark>): boolean {
  for (const [key, mark] of a) {
    const other = b.get(key);
    if (other === undefined || mark.seq > other.seq) return false;
  }
  return true;
}

function returnedEquals(a: ReadonlyMap<string, ReturnedMark>, b: ReadonlyMap<string, ReturnedMark>): boolean {
  if (a.size !== b.size) return false;
  for (const [key, mark] of a) {
    if (b.get(key)?.seq !== mark.seq) return false;
  }
  return true;
}

/** True when the borrower has returned this loan (or a later one) from its lender: never use it again. */
function isReturned(state: ReadonlyMap<string, ReturnedMark>, loan: Loan): boolean {
  const mark = state.get(pairKey(loan.lender, loan.borrower));
  return mark !== undefined && loan.seq <= mark.seq;
}

export const ReturnedRegister = {
  initial: returnedInitial,
  markReturned,
  join: returnedJoin,
  mergeInto: returnedMergeInto,
  leq: returnedLeq,
  equals: returnedEquals,
  isReturned,
} as const;
