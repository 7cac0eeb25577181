// Prometheus metrics of one limiter process. Label values are bounded: result
// and source are enums, key class is the policy's tenant (explicit policies
// only, else "default"), so arbitrary tenants never create series.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BreakerState } from "./breaker.js";

export interface LimiterMetrics {
  readonly decisions: Counter<"result" | "source">;
  readonly latency: Histogram<"source">;
  readonly storeErrors: Counter<"op" | "kind">;
  readonly breakerState: Gauge;
  readonly share: Gauge<"key_class" | "resource">;
  readonly leasedTokens: Gauge;
}

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

export function breakerStateValue(s: BreakerState): number {
  return BREAKER_VALUE[s];
}

export function createMetrics(registry: Registry): LimiterMetrics {
  const registers = [registry];
  return {
    decisions: new Counter({
      name: "geoquota_decisions_total",
      help: "Check decisions by result (allowed|denied) and source (store|lease|fail_open|unavailable)",
      labelNames: ["result", "source"] as const,
      registers,
    }),
    latency: new Histogram({
      name: "geoquota_check_duration_seconds",
      help: "Time to decide one check, by source",
      labelNames: ["source"] as const,
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers,
    }),
    storeErrors: new Counter({
      name: "geoquota_redis_errors_total",
      help: "Failed store (Redis) calls by operation and kind (timeout|error|breaker_open)",
      labelNames: ["op", "kind"] as const,
      registers,
    }),
    breakerState: new Gauge({
      name: "geoquota_breaker_state",
      help: "Circuit breaker around the store: 0 closed, 1 half-open, 2 open",
      registers,
    }),
    share: new Gauge({
      name: "geoquota_share_ppm",
      help: "Share (ppm of 1e6) this region used for its last decision, by key class and resource",
      labelNames: ["key_class", "resource"] as const,
      registers,
    }),
    leasedTokens: new Gauge({
      name: "geoquota_leased_keys",
      help: "Keys holding in-process leases",
      registers,
    }),
  };
}
