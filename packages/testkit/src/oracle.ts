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
  /** Net admitted cost (cost − refunded). */
  readonly cost: number;
}

export interface OracleLimit {
  readonly capacity: number;
  readonly refillPerSecond: number;
}

export interface OracleVerdict {
  readonly ok: boolean;
  readonly admitted: number;
  /** C + r·(last answer − first send) over the whole run. */
  readonly bound: number;
  /** Largest (admitted − bound) over every checked interval; ≤ 0 when ok. */
  readonly worstExcess: number;
  /** The interval with the largest excess, ms. */
  readonly worstInterval: { startMs: number; endMs: number; admitted: number; bound: number } | null;
  readonly intervalsChecked: number;
}

const EPS = 1e-9;

/** Checks the whole run and every sub-interval. O(n²) in admissions; n is small (≈ C + r·T). */
export function checkGlobalBound(admissions: readonly Admission[], limit: OracleLimit): OracleVerdict {
  const adm = admissions.filter((a) => a.cost > 0);
  const rPerMs = limit.refillPerSecond / 1000;
  if (adm.length === 0) {
    return {
      ok: true,
      admitted: 0,
      bound: limit.capacity,
      worstExcess: -limit.capacity,
      worstInterval: null,
      intervalsChecked: 0,
    };
  }
  let admitted = 0;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const a of adm) {
    admitted += a.cost;
    if (a.sentMs < first) first = a.sentMs;
    if (a.answeredMs > last) last = a.answeredMs;
  }
  const bound = limit.capacity + rPerMs * (last - first);
  let worstExcess = admitted - bound;
  let worstInterval: OracleVerdict["worstInterval"] = { startMs: first, endMs: last, admitted, bound };
  let checked = 1;

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
      const b = limit.capacity + rPerMs * (a.answeredMs - t0);
      checked++;
      if (sum - b > worstExcess) {
        worstExcess = sum - b;
        worstInterval = { startMs: t0, endMs: a.answeredMs, admitted: sum, bound: b };
      }
    }
  }
  return { ok: worstExcess <= EPS, admitted, bound, worstExcess, worstInterval, intervalsChecked: checked };
}
