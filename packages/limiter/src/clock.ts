import { performance } from "node:perf_hooks";

/** Monotonic milliseconds. Injected so breaker and lease timing are testable without sleeping. */
export type MonotonicClock = () => number;

export const monotonicNow: MonotonicClock = () => performance.now();
