// The outside oracle of DESIGN §8: from client-side records only, check that
// the global bound C + r·T held. A request sent at `sentMs` and answered at
// `answeredMs` was decided somewhere in [sentMs, answeredMs].
//
// - Whole run: Σ admitted ≤ C + r·(last answer − first send).
// - Every sub-interval [t0, t1]: counting only admissions whose [sent, answered]
//   lies inside it, Σ ≤ C + r·(t1 − t0).
// Both exactly: no tolerance factor (DESIGN trap 9). The sub-interval check is
// exhaustive over the intervals that matter: the count can only rise at an
// answer time and the bound only grows with t1 − t0, so the worst intervals
// start at a send time and end at an answer time.

export interface Admission {
  /** Client clock, ms, when the request was sent. */
  readonly sentMs: number;
  /** Client clock, ms, when the answer arrived. */
  readonly answeredMs: number;
  /** Admitted cost, gross (refunds are separate records; a matched one erases this admission, or part of it). */
  readonly cost: number;
  /** What refunds name to reverse this admission (e.g. its refund receipt); none: not refundable. */
  readonly id?: string | undefined;
}

/** A refund the service accepted, as the client recorded it. */
export interface Refund {
  readonly sentMs: number;
  readonly answeredMs: number;
  /** The `id` of the admission it reverses. */
  readonly admissionId: string | undefined;
  readonly cost: number;
}

export interface OracleLimit {
  readonly capacity: number;
  readonly refillPerSecond: number;
}

/**
 * Limits that change over time (a policy rollout, DESIGN §3): each segment's
 * limit holds for the admissions decided in [fromMs, toMs). Segments may
 * overlap: a rollout is the old limit until the change completed everywhere
 * and the new one from the moment it was proposed, so an interval inside or
 * across the rollout is bounded by max(C_old, C_new) + max(r_old, r_new)·T,
 * one before it by the old bound and one after it by the new.
 */
export interface LimitSegment extends OracleLimit {
  readonly fromMs: number;
  readonly toMs: number;
}

export interface LimitSchedule {
  readonly segments: readonly LimitSegment[];
}

/** The bound's C and r over [t0, t1]: the largest of every segment the interval meets. */
function limitOver(limit: OracleLimit | LimitSchedule, t0: number, t1: number): OracleLimit {
  if (!("segments" in limit)) return limit;
  let capacity = Number.NEGATIVE_INFINITY;
  let refillPerSecond = Number.NEGATIVE_INFINITY;
  for (const s of limit.segments) {
    if (s.fromMs > t1 || s.toMs <= t0) continue;
    if (s.capacity > capacity) capacity = s.capacity;
    if (s.refillPerSecond > refillPerSecond) refillPerSecond = s.refillPerSecond;
  }
  if (capacity === Number.NEGATIVE_INFINITY) {
    throw new RangeError(`oracle: no limit segment covers [${t0}, ${t1}] ms`);
  }
  return { capacity, refillPerSecond };
}

export interface OracleVerdict {
  readonly ok: boolean;
  /** Gross admitted cost. */
  readonly admitted: number;
  /** Refunded cost that matched an admission (erased from it before the bound is checked). */
  readonly refundedMatched: number;
  /** Refunded cost the service accepted that matched nothing (a refund minting quota, if admitted). */
  readonly refundedUnmatched: number;
  /** C + r·(last answer − first send) over the whole run. */
  readonly bound: number;
  /** Largest (admitted, refunded admissions erased, − bound) over every checked interval; ≤ 0 when ok. */
  readonly worstExcess: number;
  /** The interval with the largest excess, ms (`admitted` there without the erased admissions). */
  readonly worstInterval: { startMs: number; endMs: number; admitted: number; bound: number } | null;
  readonly intervalsChecked: number;
}

const EPS = 1e-9;

interface Matched {
  readonly sentMs: number;
  readonly answeredMs: number;
  readonly cost: number;
}

/**
 * A refund counts only against the admission it names, only if sent after
 * that admission was answered (its receipt existed), and only up to the
 * admission's cost, refunds of one admission taken in send order. The rest
 * of a refund counts for nothing: a service that accepted it minted quota.
 * `erased`: per admission id, the cost its matched refunds erased.
 */
export function matchRefunds(
  admissions: readonly Admission[],
  refunds: readonly Refund[],
): { matched: Matched[]; unmatched: number; erased: Map<string, number> } {
  const left = new Map<string, { answeredMs: number; cost: number }>();
  for (const a of admissions) {
    if (a.id === undefined || !(a.cost > 0)) continue;
    const prev = left.get(a.id);
    // Two admissions with one id: neither is identifiable; refunds of that id match nothing.
    left.set(
      a.id,
      prev === undefined ? { answeredMs: a.answeredMs, cost: a.cost } : { answeredMs: 0, cost: 0 },
    );
  }
  const matched: Matched[] = [];
  const erased = new Map<string, number>();
  let unmatched = 0;
  for (const r of [...refunds].sort((x, y) => x.sentMs - y.sentMs)) {
    if (!(r.cost > 0)) continue;
    const a = r.admissionId === undefined ? undefined : left.get(r.admissionId);
    const take = a !== undefined && r.sentMs >= a.answeredMs ? Math.min(r.cost, a.cost) : 0;
    if (take > 0) {
      a!.cost -= take;
      matched.push({ sentMs: r.sentMs, answeredMs: r.answeredMs, cost: take });
      erased.set(r.admissionId!, (erased.get(r.admissionId!) ?? 0) + take);
    }
    unmatched += r.cost - take;
  }
  return { matched, unmatched, erased };
}

/** The history a service owes the bound on: each admission less what its matched refunds erased. */
function eraseRefunded(adm: readonly Admission[], erased: ReadonlyMap<string, number>): Admission[] {
  const out: Admission[] = [];
  for (const a of adm) {
    const cost = a.id === undefined ? a.cost : a.cost - (erased.get(a.id) ?? 0);
    if (cost > 0) out.push(cost === a.cost ? a : { ...a, cost });
  }
  return out;
}

/**
 * Checks the whole run and every sub-interval. O(n²) in admissions; n is
 * small (≈ C + r·T). With a schedule the worst intervals are still (send,
 * answer) pairs: a later start never meets more segments.
 *
 * Refunds (DESIGN §7): a refund erases the admission it names. Each matched
 * refund is removed from its admission (the whole admission when refunded in
 * full) and the bound is checked, exactly, on what remains: a service may give
 * back only what the admission still keeps out of its bucket. Counting a
 * refund as fresh capacity at the instant it is applied would let a late
 * refund of an old admission mint a burst.
 */
export function checkGlobalBound(
  admissions: readonly Admission[],
  limit: OracleLimit | LimitSchedule,
  refunds: readonly Refund[] = [],
): OracleVerdict {
  const gross = admissions.filter((a) => a.cost > 0);
  const { matched, unmatched, erased } = matchRefunds(gross, refunds);
  const refundedMatched = matched.reduce((s, m) => s + m.cost, 0);
  const adm = eraseRefunded(gross, erased);
  const fixed = "segments" in limit ? undefined : limit;
  let admitted = 0;
  for (const a of gross) admitted += a.cost;
  if (adm.length === 0) {
    const c = fixed?.capacity ?? 0;
    return {
      ok: true,
      admitted,
      refundedMatched,
      refundedUnmatched: unmatched,
      bound: c,
      worstExcess: -c,
      worstInterval: null,
      intervalsChecked: 0,
    };
  }
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const a of adm) {
    if (a.sentMs < first) first = a.sentMs;
    if (a.answeredMs > last) last = a.answeredMs;
  }
  const whole = limitOver(limit, first, last);
  const bound = whole.capacity + (whole.refillPerSecond / 1000) * (last - first);
  let worstExcess = Number.NEGATIVE_INFINITY;
  let worstInterval: OracleVerdict["worstInterval"] = null;
  let checked = 0;

  // For each start t0 = a send time, sweep admissions with sent ≥ t0 in
  // answer order; the running sum at each answer time t1 is what lies inside [t0, t1].
  const bySent = [...adm].sort((a, b) => a.sentMs - b.sentMs);
  const byAnswer = [...adm].sort((a, b) => a.answeredMs - b.answeredMs);
  for (let i = 0; i < bySent.length; i++) {
    const t0 = bySent[i]!.sentMs;
    if (i > 0 && bySent[i - 1]!.sentMs === t0) continue;
    let sum = 0;
    for (const a of byAnswer) {
      if (a.sentMs < t0) continue;
      sum += a.cost;
      const l = fixed ?? limitOver(limit, t0, a.answeredMs);
      const b = l.capacity + (l.refillPerSecond / 1000) * (a.answeredMs - t0);
      checked++;
      if (sum - b > worstExcess) {
        worstExcess = sum - b;
        worstInterval = { startMs: t0, endMs: a.answeredMs, admitted: sum, bound: b };
      }
    }
  }
  return {
    ok: worstExcess <= EPS,
    admitted,
    refundedMatched,
    refundedUnmatched: unmatched,
    bound,
    worstExcess,
    worstInterval,
    intervalsChecked: checked,
  };
}
