/**
 * Inbound frame budget per peer: `burst` tokens, refilled at `ratePerSecond`.
 * The clock is injected (milliseconds, monotonic) so tests can freeze it.
 */
export class TokenBucket {
  private tokens: number;
  private lastMs: number;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.lastMs = now();
  }

  /** Takes one token; false means the frame is over budget. */
  take(): boolean {
    const t = this.now();
    const elapsed = Math.max(0, t - this.lastMs);
    this.lastMs = t;
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.ratePerSecond) / 1000);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
