// The exact G1 oracle of a simulation (admission instants known exactly,
// unlike the outside oracle in oracle.ts, which judges client records whose
// decision instant lies somewhere between send and answer): over every interval [t_i, t_j] between admission
// instants, Σ cost admitted in it ≤ C + r·(t_j − t_i). Checked incrementally
// at each admission in O(1): with A_j the running total including j,
//   A_j − A_{i−1} ≤ C + r·(t_j − t_i)
//   ⇔ (A_j·10⁶ − r·t_j) − (A_{i−1}·10⁶ − r·t_i) ≤ C·10⁶,
// so it suffices to keep min over i ≤ j of (A_{i−1}·10⁶ − r·t_i). Costs, C and
// r are integers and times integer µs, so every term is an exact integer
// (< 2^53 for any run the model makes): no tolerance anywhere.

export class WindowOracle {
  private readonly capacityScaled: number;
  private readonly ratePerSec: number;
  private total = 0;
  private minPrefix = Number.POSITIVE_INFINITY;
  /** Worst (A_j − A_{i−1})·10⁶ − r·(t_j − t_i) − C·10⁶ seen; > 0 is a violation. */
  worstExcessScaled = Number.NEGATIVE_INFINITY;
  violation: string | undefined;
  admissions = 0;
  private minAtUs = 0;

  constructor(capacity: number, refillPerSecond: number) {
    if (!Number.isSafeInteger(capacity) || !Number.isSafeInteger(refillPerSecond)) {
      throw new RangeError("WindowOracle needs integer C and r to stay exact");
    }
    this.capacityScaled = capacity * 1e6;
    this.ratePerSec = refillPerSecond;
  }

  /** Records an admission of integer `cost` at real time `atUs` (non-decreasing). */
  admit(atUs: number, cost: number): void {
    const start = this.total * 1e6 - this.ratePerSec * atUs;
    if (start < this.minPrefix) {
      this.minPrefix = start;
      this.minAtUs = atUs;
    }
    this.total += cost;
    this.admissions++;
    const excess = this.total * 1e6 - this.ratePerSec * atUs - this.minPrefix - this.capacityScaled;
    if (excess > this.worstExcessScaled) this.worstExcessScaled = excess;
    if (excess > 0 && this.violation === undefined) {
      this.violation =
        `G1 violated: admitted over [${this.minAtUs}, ${atUs}] µs exceeds C + r·T by ` +
        `${excess / 1e6} (C=${this.capacityScaled / 1e6}, r=${this.ratePerSec}/s)`;
    }
  }

  get admitted(): number {
    return this.total;
  }
}

/** Brute force over all pairs: the reference the incremental oracle is tested against. */
export function bruteForceExcess(
  admissions: readonly { atUs: number; cost: number }[],
  capacity: number,
  refillPerSecond: number,
): number {
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < admissions.length; i++) {
    let sum = 0;
    const a = admissions[i];
    if (a === undefined) continue;
    for (let j = i; j < admissions.length; j++) {
      const b = admissions[j];
      if (b === undefined) continue;
      sum += b.cost;
      worst = Math.max(worst, sum * 1e6 - refillPerSecond * (b.atUs - a.atUs) - capacity * 1e6);
    }
  }
  return worst;
}
