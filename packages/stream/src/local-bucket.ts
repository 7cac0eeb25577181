// A per-connection token bucket, in memory: the cap that keeps one connection
// from taking its tenant's whole quota. It guards nothing global (the shared
// lease does), so it needs no Redis; it pays partially so that a frame larger
// than its capacity still passes, one refill at a time.
import type { MonotonicClock } from "@geoquota/limiter/internal";

export class LocalBucket {
  private tokens: number;
  private lastMs: number;

  constructor(
    readonly capacity: number,
    readonly refillPerSecond: number,
    private readonly clock: MonotonicClock,
  ) {
    if (!(capacity > 0) || !(refillPerSecond > 0)) throw new RangeError("capacity and refill must be > 0");
    this.tokens = capacity;
    this.lastMs = clock();
  }

  private refill(): void {
    const now = this.clock();
    if (now > this.lastMs) {
      this.tokens = Math.min(
        this.capacity,
        this.tokens + ((now - this.lastMs) * this.refillPerSecond) / 1000,
      );
      this.lastMs = now;
    }
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
    return missing <= 0 ? 0 : (missing * 1000) / this.refillPerSecond;
  }

  available(): number {
    this.refill();
    return Math.floor(this.tokens);
  }
}
