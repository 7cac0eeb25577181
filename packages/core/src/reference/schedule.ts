// The share function s(t) of docs/internals.md and its breakpoints.
//
//   s(t) = t < holdEnd ? 0 : t < recoveryEnd ? min(floor, base)
//        : base − Σ_k reserved_k(t) + Σ_j used_j(t), clamped to [0, U]
//   reserved_k(t) = max units over the lender's staircase to k with t < deadline + ε
//   used_j(t)     = units of the highest-seq loan from j if t < deadline − ε and seq > returned_j
//
// Every quantity is an integer (ppm, µs), so the Lua script computes the same
// values bit for bit.
import { type LeaseHold, type LoanEntry, SHARE_UNITS } from "../types.js";

/** The loan fields of `P:l` for one key (docs/internals.md). */
export interface LoanBook {
  /** `g|<borrower>`: the latest grant to each borrower (the gossiped register). */
  readonly granted: Map<string, LoanEntry>;
  /** `o|<borrower>`: grants still counted by the lender, oldest first. */
  readonly outstanding: Map<string, LoanEntry[]>;
  /** `i|<lender>`: the highest-seq loan received from each lender. */
  readonly received: Map<string, LoanEntry>;
  /** `r|<lender>`: the highest seq returned early to each lender. */
  readonly returned: Map<string, number>;
  /** `sq`: the last seq this key issued (seqs only grow, across borrowers). */
  lastSeq: number;
}

export function emptyLoanBook(): LoanBook {
  return { granted: new Map(), outstanding: new Map(), received: new Map(), returned: new Map(), lastSeq: 0 };
}

export interface ShareInputs {
  readonly baseShare: number;
  readonly floorShare: number;
  readonly recoveryEndUs: number;
  /** Recovery with leased mode: share 0 before this instant (core.ts leaseHoldEndUs). */
  readonly holdEndUs: number;
  readonly epsilonUs: number;
  readonly book: LoanBook;
}

/** Whether the lender still reserves a loan it granted at t (trap 2: until deadline + ε). */
export function loanOutstanding(loan: Pick<LoanEntry, "deadlineUs">, t: number, epsilonUs: number): boolean {
  return t < loan.deadlineUs + epsilonUs;
}

/** The lender's reservation for one borrower at t: max units still outstanding. */
export function reservedAt(entries: readonly LoanEntry[], t: number, epsilonUs: number): number {
  let max = 0;
  for (const e of entries) if (loanOutstanding(e, t, epsilonUs) && e.units > max) max = e.units;
  return max;
}

/**
 * Whether the borrower may use `loan` at t (trap 2: until deadline − ε; trap
 * 12: not once returned). `returnedSeq` is the seq of the last early return to
 * that lender, 0 when none (as the scripts read a missing `r|` field).
 */
export function loanUsable(
  loan: Pick<LoanEntry, "deadlineUs" | "seq">,
  returnedSeq: number,
  t: number,
  epsilonUs: number,
): boolean {
  return loan.seq > returnedSeq && t < loan.deadlineUs - epsilonUs;
}

export function shareAt(inp: ShareInputs, t: number): number {
  if (t < inp.recoveryEndUs) return t < inp.holdEndUs ? 0 : Math.min(inp.floorShare, inp.baseShare);
  let s = inp.baseShare;
  for (const entries of inp.book.outstanding.values()) s -= reservedAt(entries, t, inp.epsilonUs);
  for (const [lender, loan] of inp.book.received) {
    if (loanUsable(loan, inp.book.returned.get(lender) ?? 0, t, inp.epsilonUs)) s += loan.units;
  }
  return Math.min(SHARE_UNITS, Math.max(0, s));
}

/** Leased tokens still reserved at t (an expired lease counts as used, not as returned). */
export function outstandingAt(leases: Iterable<LeaseHold>, t: number): number {
  let sum = 0;
  for (const l of leases) if (t < l.expiryUs) sum += l.tokens;
  return sum;
}

/** Share held by quota assignments still live at t (lua/lib/schedule.lua assigned_at). */
export function assignedAt(leases: Iterable<LeaseHold>, t: number): number {
  let sum = 0;
  for (const l of leases) if (l.shareUnits !== undefined && t < l.expiryUs) sum += l.shareUnits;
  return sum;
}

/** The bucket's own share at t: s(t) less what live assignments hold, never below 0 (slice_at). */
export function sliceAt(inp: ShareInputs, leases: Iterable<LeaseHold>, t: number): number {
  return Math.max(0, shareAt(inp, t) - assignedAt(leases, t));
}

/**
 * Instants in (fromUs, toUs] where s(t) may change without a script:
 * recovery end, the end of the lease hold, a reservation passing deadline + ε, a loan passing deadline − ε.
 */
export function shareBreakpoints(
  inp: ShareInputs,
  fromUs: number,
  toUs = Number.POSITIVE_INFINITY,
): number[] {
  const points: number[] = [inp.recoveryEndUs, inp.holdEndUs];
  for (const entries of inp.book.outstanding.values()) {
    for (const e of entries) points.push(e.deadlineUs + inp.epsilonUs);
  }
  for (const [lender, loan] of inp.book.received) {
    if (loan.seq > (inp.book.returned.get(lender) ?? 0)) points.push(loan.deadlineUs - inp.epsilonUs);
  }
  return uniqueSortedWithin(points, fromUs, toUs);
}

/** Instants in (fromUs, toUs] where an in-process lease expires. */
export function leaseBreakpoints(
  leases: Iterable<LeaseHold>,
  fromUs: number,
  toUs = Number.POSITIVE_INFINITY,
): number[] {
  return uniqueSortedWithin(
    Array.from(leases, (l) => l.expiryUs),
    fromUs,
    toUs,
  );
}

function uniqueSortedWithin(points: number[], fromUs: number, toUs: number): number[] {
  const inside = points.filter((p) => p > fromUs && p <= toUs).sort((a, b) => a - b);
  return inside.filter((p, i) => i === 0 || p !== inside[i - 1]);
}

/** From `atUs` on (until the next point), the bucket runs at `share` with `outstanding` leased. */
export interface SchedulePoint {
  readonly atUs: number;
  readonly share: number;
  readonly outstanding: number;
}

/**
 * What the bucket hash stores so the hot path needs no loan records: the share
 * and leased amount now, and every later change. Points that change nothing
 * are dropped.
 */
export interface Schedule {
  readonly share: number;
  readonly outstanding: number;
  readonly next: readonly SchedulePoint[];
}

export function buildSchedule(inp: ShareInputs, leases: readonly LeaseHold[], fromUs: number): Schedule {
  const share = sliceAt(inp, leases, fromUs);
  const outstanding = outstandingAt(leases, fromUs);
  const times = uniqueSortedWithin(
    [...shareBreakpoints(inp, fromUs), ...leaseBreakpoints(leases, fromUs)],
    fromUs,
    Number.POSITIVE_INFINITY,
  );
  const next: SchedulePoint[] = [];
  let prevS = share;
  let prevO = outstanding;
  for (const t of times) {
    const s = sliceAt(inp, leases, t);
    const o = outstandingAt(leases, t);
    if (s === prevS && o === prevO) continue;
    next.push({ atUs: t, share: s, outstanding: o });
    prevS = s;
    prevO = o;
  }
  return { share, outstanding, next };
}

// ---------------------------------------------------------------- pins

// Process leases pin share (DESIGN §3): tokens handed to in-process clients
// stay spendable until the lease expires, whatever happens to the share, so
// no script may lower the share below what backs them. Per region, at every
// instant t from now to the last lease expiry, with the share schedule as the
// records stand:  outstanding(t) ≤ C·s(t)/U  (the bucket's own tokens are
// clamped to C·s(t)/U − outstanding(t) at every piece, so then
// outstanding + max(tokens, 0) ≤ C·s(t)/U too). Mirrors lua/lib/schedule.lua pins_hold.

/**
 * Whether the share schedule `inp` backs every lease outstanding at or after
 * `nowUs`, checked at now and at every instant where the share or the leased
 * amount changes before the last expiry (the order of the checks does not
 * matter: all must hold).
 */
export function pinsHold(
  inp: ShareInputs,
  leases: readonly LeaseHold[],
  capacity: number,
  nowUs: number,
): boolean {
  let lastExpiryUs = Number.NEGATIVE_INFINITY;
  for (const l of leases) if (l.expiryUs > nowUs && l.expiryUs > lastExpiryUs) lastExpiryUs = l.expiryUs;
  if (lastExpiryUs === Number.NEGATIVE_INFINITY) return true;
  // Quota assignments (DESIGN §11) hold share too: it backs them, so it is not the bucket's to lend.
  const backed = (t: number) =>
    (capacity * (shareAt(inp, t) - assignedAt(leases, t))) / SHARE_UNITS - outstandingAt(leases, t) >= 0;
  if (!backed(nowUs)) return false;
  for (const t of shareBreakpoints(inp, nowUs, lastExpiryUs))
    if (t < lastExpiryUs && !backed(t)) return false;
  for (const t of leaseBreakpoints(leases, nowUs, lastExpiryUs))
    if (t < lastExpiryUs && !backed(t)) return false;
  return true;
}

/**
 * The per-region invariant as a number (for tests): the largest
 * outstanding(t) − C·s(t)/U over now and every later change point of the
 * schedule `inp` until the last lease expiry; ≤ 0 when the leases are backed.
 */
export function pinExcess(
  inp: ShareInputs,
  leases: readonly LeaseHold[],
  capacity: number,
  nowUs: number,
): number {
  const held = (t: number) => (capacity * (shareAt(inp, t) - assignedAt(leases, t))) / SHARE_UNITS;
  let worst = outstandingAt(leases, nowUs) - held(nowUs);
  for (const t of [...shareBreakpoints(inp, nowUs), ...leaseBreakpoints(leases, nowUs)]) {
    const e = outstandingAt(leases, t) - held(t);
    if (e > worst) worst = e;
  }
  return worst;
}
