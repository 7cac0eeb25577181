// Section 1: the Redis path, one EVALSHA per decision, four clients on the
// same Redis at the same concurrency, in alternating runs so drift in the
// shared machine's load hits all of them alike: the bare script (ceiling), the
// store (`store.check`), the whole decision engine over a store of its own
// (`Limiter.check`: policy resolution, key hygiene, breaker, receipts), and
// rate-limiter-flexible. Then micro-batched `store.check` (issue 24 point 2:
// the store's `batch` option, 64 checks or 500 µs / 1 ms per batch) beside
// them, in the same alternation, at 4 batches' worth in flight (256): at 64 in
// flight one batch takes every waiting check and the next waits for its reply,
// so batching could never show more than one call's throughput. The ceiling
// also runs at 256 in flight, and a batched rate is compared with the better of
// the two ceilings of its round.
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { createRedisStore, initFreshRegion, Limiter } from "@geoquota/limiter";
import type { RedisServer } from "@geoquota/procs";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { bindCeiling } from "./ceiling.js";
import { type ClosedLoopResult, median, runClosedLoop } from "./closed-loop.js";
import { Histogram } from "./histogram.js";
import { BENCH_REGION, benchPolicies, KEYS, TIMING } from "./policies.js";
import { commandStats, type StatsDelta, statsBetween } from "./redis-stats.js";
import type { Budget, LatencySummary } from "./types.js";

export const IN_FLIGHT = 64;
const MAX_OPS_PER_RUN = 5_000_000;

export interface PathFigures extends LatencySummary {
  readonly decisionsPerSecond: number;
  readonly decisions: number;
  /** Script round-trips per decision (INFO commandstats): 1 is one EVALSHA. */
  readonly scriptCallsPerDecision: number;
  /** Commands run inside the script per decision (what Redis does for it). */
  readonly innerCommandsPerDecision: number;
  /** Redis CPU per decision, µs: above ~1e6 / decisions/s means Redis is the bottleneck. */
  readonly redisUsecPerDecision: number;
  /** This process's CPU (user + system) per decision, µs: the client side, driver loop included. */
  readonly nodeUsecPerDecision: number;
}

export interface RedisPathResult {
  readonly inFlight: number;
  readonly keys: number;
  readonly rounds: number;
  readonly runMs: number;
  readonly ceiling: PathFigures;
  readonly geoquota: PathFigures;
  readonly limiter: PathFigures;
  readonly rlf: PathFigures;
  /** The ceiling at `batchedInFlight` checks in flight. */
  readonly ceilingBatchedInFlight: PathFigures;
  /** Checks in flight for the batched variants and `ceilingBatchedInFlight`. */
  readonly batchedInFlight: number;
  /** `store.check` micro-batched (`batch: { maxChecks: BATCH_CHECKS, maxWaitUs: 500 | 1000 }`). */
  readonly batch500: PathFigures;
  readonly batch1ms: PathFigures;
  /** Median over rounds of geoquota ÷ ceiling decisions/s (paired runs). */
  readonly ratioVsCeiling: number;
  readonly ratioVsRlf: number;
  /** The same for `Limiter.check`. */
  readonly limiterVsCeiling: number;
  readonly limiterVsRlf: number;
  /** Median over rounds of batched ÷ ceiling decisions/s (the better one-call ceiling of the same round). */
  readonly batch500VsCeiling: number;
  readonly batch1msVsCeiling: number;
  /** geoquota ÷ ceiling Redis CPU per decision (commandstats). */
  readonly redisCpuVsCeiling: number;
}

const VARIANTS = ["ceiling", "geoquota", "limiter", "rlf", "ceiling256", "batch500", "batch1ms"] as const;
/** The batched variants' batch size: the config default (redis.batch.maxChecks). */
export const BATCH_CHECKS = 64;
/** Checks in flight for the batched variants (and the second ceiling): four batches pipelined. */
export const BATCHED_IN_FLIGHT = 2 * BATCH_CHECKS;
const inFlightOf = (v: Variant): number =>
  v === "ceiling256" || v === "batch500" || v === "batch1ms" ? BATCHED_IN_FLIGHT : IN_FLIGHT;
type Variant = (typeof VARIANTS)[number];

interface Measured {
  readonly loop: ClosedLoopResult;
  readonly redis: StatsDelta;
  /** process.cpuUsage() delta, µs. */
  readonly nodeUsec: number;
}

function figures(runs: Measured[]): PathFigures {
  const hist = new Histogram();
  let ops = 0;
  let ms = 0;
  let scripts = 0;
  let inner = 0;
  let usec = 0;
  let node = 0;
  for (const r of runs) {
    node += r.nodeUsec;
    hist.merge(r.loop.hist);
    ops += r.loop.ops;
    ms += r.loop.elapsedMs;
    scripts += r.redis.scriptCalls;
    inner += r.redis.otherCalls;
    usec += r.redis.scriptUsec;
  }
  const per = (x: number) => (ops > 0 ? x / ops : 0);
  return {
    decisionsPerSecond: ops / (ms / 1000),
    decisions: ops,
    scriptCallsPerDecision: per(scripts),
    innerCommandsPerDecision: per(inner),
    redisUsecPerDecision: per(usec),
    nodeUsecPerDecision: per(node),
    p50Us: hist.quantileUs(0.5),
    p99Us: hist.quantileUs(0.99),
    p999Us: hist.quantileUs(0.999),
  };
}

/** The decision engine as the service runs it (leases off: every decision goes to Redis). */
function benchLimiter(store: ReturnType<typeof createRedisStore>, url: string): Limiter {
  const config = parseRegionConfig(
    {
      region: BENCH_REGION,
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url, timeoutMs: 1000 },
      regions: [{ id: BENCH_REGION, gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 2 }, plaintext: true },
      sharedSecret: "bench-shared-secret-0123456789",
      adminToken: "bench-admin-token-0123456789",
    },
    { file: "bench-region.json", env: {} },
  );
  const policies = parsePolicies(
    { default: { algorithm: "token_bucket", capacity: 1e9, refillPerSecond: 1e9 } },
    "bench-policies.json",
    [BENCH_REGION],
  );
  return new Limiter({ store, config, policies });
}

export async function benchRedisPath(server: RedisServer, budget: Budget): Promise<RedisPathResult> {
  // One connection per client, so no client queues behind another's replies.
  const conns = {
    ceiling: server.client(),
    ceiling256: server.client(),
    geoquota: server.client(),
    limiter: server.client(),
    rlf: server.client(),
    batch500: server.client(),
    batch1ms: server.client(),
  };
  await initFreshRegion(conns.geoquota);
  const ceiling = bindCeiling(conns.ceiling);
  const ceiling256 = bindCeiling(conns.ceiling256);
  const store = createRedisStore({ redis: conns.geoquota, region: BENCH_REGION, timing: TIMING });
  const limiter = benchLimiter(
    createRedisStore({ redis: conns.limiter, region: BENCH_REGION, timing: TIMING }),
    server.url,
  );
  const batched = (client: typeof conns.geoquota, maxWaitUs: number) =>
    createRedisStore({
      redis: client,
      region: BENCH_REGION,
      timing: TIMING,
      batch: { maxChecks: BATCH_CHECKS, maxWaitUs },
    });
  const batch500 = batched(conns.batch500, 500);
  const batch1ms = batched(conns.batch1ms, 1000);
  const policies = benchPolicies();
  const rlf = new RateLimiterRedis({
    storeClient: conns.rlf,
    keyPrefix: "rlf",
    points: 1e9,
    duration: 1,
  });
  const ops: Record<Variant, (i: number) => Promise<unknown>> = {
    ceiling: (i) => ceiling(`ceil:{t${i % KEYS}}`, 1e9, 1e9),
    ceiling256: (i) => ceiling256(`ceil:{t${i % KEYS}}`, 1e9, 1e9),
    geoquota: (i) => store.check(policies[i % KEYS]!, 1),
    // Other tenants than the store's (l…), so the two never share a bucket.
    limiter: (i) => limiter.check(`l${i % KEYS}`, "api", 1),
    rlf: (i) => rlf.consume(`t${i % KEYS}`, 1),
    // The store's keys (t…): every variant but the limiter runs on them in turn.
    batch500: (i) => batch500.check(policies[i % KEYS]!, 1),
    batch1ms: (i) => batch1ms.check(policies[i % KEYS]!, 1),
  };
  const run = async (v: Variant, durationMs: number): Promise<Measured> => {
    const before = await commandStats(conns.ceiling);
    const cpu = process.cpuUsage();
    const loop = await runClosedLoop({
      inFlight: inFlightOf(v),
      durationMs,
      maxOps: MAX_OPS_PER_RUN,
      op: ops[v],
    });
    const used = process.cpuUsage(cpu);
    const redis = statsBetween(before, await commandStats(conns.ceiling));
    return { loop, redis, nodeUsec: used.user + used.system };
  };

  // Warm-up: scripts loaded, keys created, JIT settled; not measured.
  for (const v of VARIANTS) await run(v, Math.min(500, budget.runMs));

  const results: Record<Variant, Measured[]> = {
    ceiling: [],
    ceiling256: [],
    geoquota: [],
    limiter: [],
    rlf: [],
    batch500: [],
    batch1ms: [],
  };
  const ratios = {
    vsCeiling: [] as number[],
    vsRlf: [] as number[],
    lVsCeiling: [] as number[],
    lVsRlf: [] as number[],
    b500: [] as number[],
    b1ms: [] as number[],
  };
  for (let round = 0; round < budget.rounds; round++) {
    const m = {} as Record<Variant, Measured>;
    for (const v of VARIANTS) {
      m[v] = await run(v, budget.runMs);
      results[v].push(m[v]);
    }
    const rate = (v: Variant) => m[v].loop.opsPerSecond;
    ratios.vsCeiling.push(rate("geoquota") / rate("ceiling"));
    ratios.vsRlf.push(rate("geoquota") / rate("rlf"));
    ratios.lVsCeiling.push(rate("limiter") / rate("ceiling"));
    ratios.lVsRlf.push(rate("limiter") / rate("rlf"));
    const oneCall = Math.max(rate("ceiling"), rate("ceiling256"));
    ratios.b500.push(rate("batch500") / oneCall);
    ratios.b1ms.push(rate("batch1ms") / oneCall);
  }
  await limiter.close();
  await store.close();
  await batch500.close();
  await batch1ms.close();
  for (const c of Object.values(conns)) c.disconnect();
  const ceilingFigures = figures(results.ceiling);
  const geoquotaFigures = figures(results.geoquota);
  return {
    inFlight: IN_FLIGHT,
    keys: KEYS,
    rounds: budget.rounds,
    runMs: budget.runMs,
    ceiling: ceilingFigures,
    geoquota: geoquotaFigures,
    limiter: figures(results.limiter),
    rlf: figures(results.rlf),
    ceilingBatchedInFlight: figures(results.ceiling256),
    batchedInFlight: BATCHED_IN_FLIGHT,
    batch500: figures(results.batch500),
    batch1ms: figures(results.batch1ms),
    ratioVsCeiling: median(ratios.vsCeiling),
    ratioVsRlf: median(ratios.vsRlf),
    limiterVsCeiling: median(ratios.lVsCeiling),
    limiterVsRlf: median(ratios.lVsRlf),
    batch500VsCeiling: median(ratios.b500),
    batch1msVsCeiling: median(ratios.b1ms),
    redisCpuVsCeiling:
      ceilingFigures.redisUsecPerDecision > 0
        ? geoquotaFigures.redisUsecPerDecision / ceilingFigures.redisUsecPerDecision
        : 0,
  };
}
