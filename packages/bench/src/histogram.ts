// Latency histogram with log-spaced buckets (2% wide): O(1) record, fixed
// memory whatever the run length, percentiles within 2%. Values in µs.
const GROWTH = 1.02;
const LOG_GROWTH = Math.log(GROWTH);
const MIN_US = 0.05;
const BUCKETS = 1200; // 0.05 µs · 1.02^1200 ≈ 1e9 µs: anything longer lands in the last bucket

export class Histogram {
  private readonly counts = new Float64Array(BUCKETS);
  private n = 0;
  private maxUs = 0;

  record(us: number): void {
    const v = Math.max(us, MIN_US);
    let i = Math.floor(Math.log(v / MIN_US) / LOG_GROWTH);
    if (i >= BUCKETS) i = BUCKETS - 1;
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.n++;
    if (us > this.maxUs) this.maxUs = us;
  }

  merge(other: Histogram): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i] = (this.counts[i] ?? 0) + (other.counts[i] ?? 0);
    this.n += other.n;
    if (other.maxUs > this.maxUs) this.maxUs = other.maxUs;
  }

  get count(): number {
    return this.n;
  }

  /** The q-quantile (0..1) in µs: the upper edge of its bucket (0 when empty). */
  quantileUs(q: number): number {
    if (this.n === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.n));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return Math.min(this.maxUs, MIN_US * GROWTH ** (i + 1));
    }
    return this.maxUs;
  }
}
