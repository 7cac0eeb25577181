// Section 8 (issue 24 point 9): decisions with the region's Redis down. One
// `Limiter` (the engine as the service runs it, config defaults: breaker,
// redis.timeoutMs) over a real redis-server, 100 keys of C = 100, r = 100/s
// each; 16 closed loops call `check` on random keys. Each mode runs a healthy
// phase first (the same run's reference), then the server is SIGKILLed (a
// crash, no goodbye to clients) and the loops run on for the outage:
//   leases      leased.enabled, failMode closed: tokens leased before the kill
//               serve, then fail-closed (deny) once they end;
//   closed      leases off, failMode closed: every decision a denial;
//   open        leases off, failMode open: per-process buckets holding the
//               region's base slice, starting empty.
// Figures per mode: decision latency (p50/p99/max) during the outage, and
// admitted ÷ bound, the bound being what the design allows this process
// during the outage: tokens it held in leases at the kill (leases), 0 (closed),
// r·b/U·T per key (open: FailOpenBuckets.bound). A ratio ≤ 1 keeps the bound.
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { createRedisStore, initFreshRegion, Limiter } from "@geoquota/limiter";
import { startRedis } from "@geoquota/procs";
import { Histogram } from "./histogram.js";
import type { Budget, LatencySummary } from "./types.js";

export const DEGRADED_KEYS = 100;
const CAPACITY = 100;
const RATE = 100;
const WORKERS = 16;
const MODES = ["leases", "closed", "open"] as const;
export type DegradedModeName = (typeof MODES)[number];

export interface DegradedPhase extends LatencySummary {
  readonly decisions: number;
  readonly admitted: number;
  readonly maxUs: number;
  readonly seconds: number;
  /**
   * When the phase ended on decisions made without the store (its last store decision
   * followed by degraded ones: the breaker open on a healthy server), the instant
   * (performance.now) of the first of them; undefined when it ended on a store decision.
   */
  readonly degradedSinceMs: number | undefined;
}

export interface DegradedMode {
  readonly mode: DegradedModeName;
  readonly healthy: DegradedPhase;
  readonly outage: DegradedPhase;
  /**
   * Admissions the design allows this process during the outage. Fail-open: r·b/U per key
   * over the outage as this process saw it, which began at the healthy phase's first
   * degraded decision when that phase ended degraded (a stall of the machine opening the
   * breaker just before the kill): its buckets started then.
   */
  readonly bound: number;
  /** Seconds of that degraded run before the kill (0 when the healthy phase ended on the store). */
  readonly degradedBeforeKillS: number;
  /** outage.admitted ÷ bound (0 when both are 0). */
  readonly admittedOverBound: number;
  /** Decisions by source during the outage (lease, unavailable, fail_open, store). */
  readonly sources: Record<string, number>;
  /** Decisions by source in the healthy phase: all `store` or `lease` unless a call failed. */
  readonly healthySources: Record<string, number>;
  /** Failed store calls in the healthy phase, by op and kind (`check:timeout`, …): none expected. */
  readonly healthyStoreErrors: Record<string, number>;
}

export interface DegradedResult {
  readonly keys: number;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly modes: DegradedMode[];
}

function limiterFor(
  mode: DegradedModeName,
  url: string,
  store: ReturnType<typeof createRedisStore>,
): Limiter {
  const config = parseRegionConfig(
    {
      region: "bench",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url },
      regions: [{ id: "bench", gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 2 }, plaintext: true },
      sharedSecret: "bench-shared-secret-0123456789",
      adminToken: "bench-admin-token-0123456789",
      failMode: mode === "open" ? "open" : "closed",
      leased: { enabled: mode === "leases" },
    },
    { file: "bench-degraded-region.json", env: {} },
  );
  const policies = parsePolicies(
    { default: { algorithm: "token_bucket", capacity: CAPACITY, refillPerSecond: RATE } },
    "bench-degraded-policies.json",
    ["bench"],
  );
  return new Limiter({ store, config, policies });
}

async function drive(limiter: Limiter, ms: number, sources?: Record<string, number>): Promise<DegradedPhase> {
  const hist = new Histogram();
  let admitted = 0;
  let maxUs = 0;
  let seed = 7;
  let degradedSinceMs: number | undefined;
  const start = performance.now();
  const deadline = start + ms;
  const worker = async () => {
    let n = 0;
    while (performance.now() < deadline) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      const t = performance.now();
      const r = await limiter.check(`t${seed % DEGRADED_KEYS}`, "api");
      const us = (performance.now() - t) * 1000;
      hist.record(us);
      if (us > maxUs) maxUs = us;
      if (r.allowed) admitted++;
      if (sources !== undefined) sources[r.source] = (sources[r.source] ?? 0) + 1;
      if (r.source === "store") degradedSinceMs = undefined;
      else if (r.degraded && degradedSinceMs === undefined) degradedSinceMs = t;
      // Let timers and socket events in, as between requests (lease and local decisions
      // settle without I/O: a longer run of them starves the Redis replies of the others).
      if ((++n & 15) === 0) await new Promise<void>((res) => setImmediate(res));
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return {
    decisions: hist.count,
    admitted,
    maxUs,
    seconds: (performance.now() - start) / 1000,
    degradedSinceMs,
    p50Us: hist.quantileUs(0.5),
    p99Us: hist.quantileUs(0.99),
    p999Us: hist.quantileUs(0.999),
  };
}

async function runMode(mode: DegradedModeName, runMs: number): Promise<DegradedMode> {
  const server = await startRedis();
  const redis = server.client();
  // A dead server must fail commands, not queue them forever (the service's client does the same).
  redis.options.maxRetriesPerRequest = 1;
  try {
    await initFreshRegion(redis);
    const store = createRedisStore({
      redis,
      region: "bench",
      timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
    });
    const limiter = limiterFor(mode, server.url, store);
    const healthyStoreErrors: Record<string, number> = {};
    const stopCounting = limiter.onStoreError((op, kind) => {
      healthyStoreErrors[`${op}:${kind}`] = (healthyStoreErrors[`${op}:${kind}`] ?? 0) + 1;
    });
    const healthySources: Record<string, number> = {};
    const healthy = await drive(limiter, runMs, healthySources);
    stopCounting();
    // What this process holds in leases at the kill: the most it may admit without Redis.
    let held = 0;
    for (let k = 0; k < DEGRADED_KEYS; k++) {
      const client = limiter.leases.peek({
        tenant: `t${k}`,
        resource: "api",
        limit: { algorithm: "token_bucket", capacity: CAPACITY, refillPerSecond: RATE },
        baseShare: 0,
        floorShare: 0,
      });
      held += client?.available() ?? 0;
    }
    const killedAt = performance.now();
    await server.kill();
    const sources: Record<string, number> = {};
    const outage = await drive(limiter, runMs, sources);
    // Fail-open: each key's bucket starts empty and refills at r·b/U (the whole share here).
    const degradedBeforeKillS =
      healthy.degradedSinceMs === undefined ? 0 : (killedAt - healthy.degradedSinceMs) / 1000;
    const bound =
      mode === "leases"
        ? held
        : mode === "open"
          ? DEGRADED_KEYS * RATE * (outage.seconds + degradedBeforeKillS)
          : 0;
    await limiter.close().catch(() => {});
    return {
      mode,
      healthy,
      outage,
      bound,
      degradedBeforeKillS,
      admittedOverBound: bound > 0 ? outage.admitted / bound : outage.admitted > 0 ? Infinity : 0,
      sources,
      healthySources,
      healthyStoreErrors,
    };
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

export async function benchDegraded(budget: Budget): Promise<DegradedResult> {
  const runMs = budget.smoke ? 700 : budget.runMs;
  const modes: DegradedMode[] = [];
  for (const m of MODES) modes.push(await runMode(m, runMs));
  return { keys: DEGRADED_KEYS, capacity: CAPACITY, refillPerSecond: RATE, modes };
}
