// Key policies the bench drives the store with directly (no config file):
// one region holding the whole share, limits high enough that every decision
// is a real admission (a denial path would flatter the cheaper side).
import type { KeyPolicy, Timing } from "@geoquota/core";

export const BENCH_REGION = "bench";
export const TIMING: Timing = { epsilonUs: 250_000, loanDurationUs: 3_000_000 };
export const KEYS = 1000;

export function benchPolicy(i: number, capacity = 1e9, refillPerSecond = 1e9): KeyPolicy {
  return {
    tenant: `t${i}`,
    resource: "api",
    limit: { algorithm: "token_bucket", capacity, refillPerSecond },
    baseShare: 1_000_000,
    floorShare: 20_000,
  };
}

export function benchPolicies(n = KEYS): KeyPolicy[] {
  return Array.from({ length: n }, (_, i) => benchPolicy(i));
}
