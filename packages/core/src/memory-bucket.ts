// The one in-memory token bucket: a capacity, a constant refill rate and a
// monotonic millisecond clock. It is the single-piece case of the split
// refill (refillPiece, the formula the scripts settle with), used where no
// global state is at stake: a stream connection's local cap, the fail-open
// bucket of a limiter process, a gossip peer's inbound frame budget.
import { refillPiece } from "./reference/bucket.js";

export class MemoryBucket {
  private tokens: number;
  private atMs: number;

  /** Starts with `initialTokens` (default full). */
  constructor(
    readonly capacity: number,
    readonly refillPerSecond: number,
    private readonly clock: () => number,
    initialTokens = capacity,
  ) {
    // capacity 0 is a bucket that never admits (a region with base share 0).
    if (
      !(capacity >= 0 && Number.isFinite(capacity)) ||
      !(refillPerSecond >= 0 && Number.isFinite(refillPerSecond))
    ) {
      throw new RangeError(
        `a bucket needs finite capacity >= 0 and refill >= 0 (got ${capacity}, ${refillPerSecond})`,
      );
    }
    this.tokens = Math.min(capacity, initialTokens);
    this.atMs = clock();
  }

  private refill(): void {
    const now = this.clock();
    if (now > this.atMs) {
      this.tokens = refillPiece(
        this.tokens,
        this.atMs * 1000,
        now * 1000,
        this.capacity,
        this.refillPerSecond,
      );
      this.atMs = now;
    }
  }

  /** Takes `cost` if all of it is there. */
  take(cost: number): boolean {
    this.refill();
    if (this.tokens < cost) return false;
    this.tokens -= cost;
    return true;
  }

  /** Takes up to `want` whole tokens; returns how many were taken. */
  takeUpTo(want: number): number {
    this.refill();
    const take = Math.min(want, Math.floor(this.tokens));
    if (take <= 0) return 0;
    this.tokens -= take;
    return take;
  }

  /** Ms until `want` whole tokens (capped at capacity) could be taken; 0 if now. */
  msUntil(want: number): number {
    this.refill();
    const target = Math.min(want, Math.floor(this.capacity));
    const missing = target - this.tokens;
    if (missing <= 0) return 0;
    return this.refillPerSecond > 0 ? (missing * 1000) / this.refillPerSecond : Number.POSITIVE_INFINITY;
  }

  /** Whole tokens available now. */
  available(): number {
    return Math.floor(this.level());
  }

  /** Tokens now, fractional. */
  level(): number {
    this.refill();
    return this.tokens;
  }
}
