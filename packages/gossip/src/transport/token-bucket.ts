// Inbound frame budget per peer: `burst` tokens, refilled at `ratePerSecond`,
// one token a frame. The clock is injected (milliseconds, monotonic) so tests
// can freeze it. The ground floor's MemoryBucket does the counting.
import { MemoryBucket } from "@geoquota/core";

export class TokenBucket {
  private readonly bucket: MemoryBucket;

  constructor(ratePerSecond: number, burst: number, now: () => number) {
    this.bucket = new MemoryBucket(burst, ratePerSecond, now);
  }

  /** Takes one token; false means the frame is over budget. */
  take(): boolean {
    return this.bucket.take(1);
  }
}
