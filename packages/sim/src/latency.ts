// Per-link latency distributions (µs). Random per-message latency is also what
// reorders messages: two sends on one link overtake each other whenever the
// second draws a shorter delay.
import type { Rng } from "./prng.js";

export type LatencyUs = (rng: Rng) => number;

export const latency = {
  fixed(us: number): LatencyUs {
    return () => us;
  },
  uniform(minUs: number, maxUs: number): LatencyUs {
    return (rng) => rng.floatIn(minUs, maxUs);
  },
  /** A floor plus an exponential tail: most messages near baseUs, a few much later. */
  exponential(baseUs: number, meanExtraUs: number): LatencyUs {
    return (rng) => baseUs + rng.exponential(meanExtraUs);
  },
  /** Usually `normal`, with probability p a spike drawn from `spike` (GC pause, retransmit). */
  spiky(normal: LatencyUs, spike: LatencyUs, p: number): LatencyUs {
    return (rng) => (rng.chance(p) ? spike(rng) : normal(rng));
  },
} as const;
