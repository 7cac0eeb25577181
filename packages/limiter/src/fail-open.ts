// Explicit fail-open (config failMode "open"): while the store is unavailable,
// each process admits from its own in-memory bucket holding this region's
// static base slice (capacity C·b/U, refill r·b/U), starting EMPTY. Never the
// seed's full capacity per pod. Overshoot bound per process over an outage of
// T seconds: r·b/U·T (it starts empty, so no burst). With P processes in the
// region: P·r·b/U·T beyond G1. Reported in responses as `failOpenBound`.
import type { MonotonicClock } from "./clock.js";
import { type KeyPolicy, MemoryBucket, quotaKey, SHARE_UNITS } from "@geoquota/core";

export interface FailOpenBound {
  /** This process's extra admissions are at most refillPerSecond × outage seconds. */
  readonly refillPerSecond: number;
  readonly capacity: number;
  readonly scope: "per_process";
}

export class FailOpenBuckets {
  private readonly buckets = new Map<string, MemoryBucket>();

  constructor(
    private readonly clock: MonotonicClock,
    private readonly maxKeys: number,
  ) {}

  static bound(policy: KeyPolicy): FailOpenBound {
    return {
      refillPerSecond: (policy.limit.refillPerSecond * policy.baseShare) / SHARE_UNITS,
      capacity: (policy.limit.capacity * policy.baseShare) / SHARE_UNITS,
      scope: "per_process",
    };
  }

  take(policy: KeyPolicy, cost: number): { allowed: boolean; remaining: number } {
    const key = quotaKey(policy.tenant, policy.resource);
    const cap = (policy.limit.capacity * policy.baseShare) / SHARE_UNITS;
    const rate = (policy.limit.refillPerSecond * policy.baseShare) / SHARE_UNITS;
    let b = this.buckets.get(key);
    if (b !== undefined && (b.capacity !== cap || b.refillPerSecond !== rate)) {
      // The policy changed: same tokens, new limits.
      b = new MemoryBucket(cap, rate, this.clock, b.level());
      this.buckets.set(key, b);
    }
    if (b === undefined) {
      if (this.buckets.size >= this.maxKeys) {
        const oldest = this.buckets.keys().next();
        if (!oldest.done) this.buckets.delete(oldest.value);
      }
      // Starts empty: an outage must not open with a burst (DESIGN §7).
      b = new MemoryBucket(cap, rate, this.clock, 0);
      this.buckets.set(key, b);
    }
    const allowed = b.take(cost);
    return { allowed, remaining: b.level() };
  }

  /**
   * Recovery (the breaker closed, or a store call answered after failures too few to open
   * it): forget the local buckets so the next outage starts empty again.
   */
  clear(): void {
    this.buckets.clear();
  }
}
