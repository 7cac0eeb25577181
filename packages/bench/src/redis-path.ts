// Section 1: the Redis path, one EVALSHA per decision, three clients on the
// same Redis at the same concurrency, in alternating runs so drift in the
// shared machine's load hits all three alike.
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
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
}

export interface RedisPathResult {
  readonly inFlight: number;
  readonly keys: number;
  readonly rounds: number;
  readonly runMs: number;
  readonly ceiling: PathFigures;
  readonly geoquota: PathFigures;
  readonly rlf: PathFigures;
  /** Median over rounds of geoquota ÷ ceiling decisions/s (paired runs). */
  readonly ratioVsCeiling: number;
  readonly ratioVsRlf: number;
}

type Variant = "ceiling" | "geoquota" | "rlf";

interface Measured {
  readonly loop: ClosedLoopResult;
  readonly redis: StatsDelta;
}

function figures(runs: Measured[]): PathFigures {
  const hist = new Histogram();
  let ops = 0;
  let ms = 0;
  let scripts = 0;
  let inner = 0;
  let usec = 0;
  for (const r of runs) {
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
    p50Us: hist.quantileUs(0.5),
    p99Us: hist.quantileUs(0.99),
    p999Us: hist.quantileUs(0.999),
  };
}

export async function benchRedisPath(server: RedisServer, budget: Budget): Promise<RedisPathResult> {
  // One connection per client, so no client queues behind another's replies.
  const conns = { ceiling: server.client(), geoquota: server.client(), rlf: server.client() };
  await initFreshRegion(conns.geoquota);
  const ceiling = bindCeiling(conns.ceiling);
  const store = createRedisStore({ redis: conns.geoquota, region: BENCH_REGION, timing: TIMING });
  const policies = benchPolicies();
  const rlf = new RateLimiterRedis({
    storeClient: conns.rlf,
    keyPrefix: "rlf",
    points: 1e9,
    duration: 1,
  });
  const ops: Record<Variant, (i: number) => Promise<unknown>> = {
    ceiling: (i) => ceiling(`ceil:{t${i % KEYS}}`, 1e9, 1e9),
    geoquota: (i) => store.check(policies[i % KEYS]!, 1),
    rlf: (i) => rlf.consume(`t${i % KEYS}`, 1),
  };
  const run = async (v: Variant, durationMs: number): Promise<Measured> => {
    const before = await commandStats(conns.ceiling);
    const loop = await runClosedLoop({
      inFlight: IN_FLIGHT,
      durationMs,
      maxOps: MAX_OPS_PER_RUN,
      op: ops[v],
    });
    return { loop, redis: statsBetween(before, await commandStats(conns.ceiling)) };
  };

  // Warm-up: scripts loaded, keys created, JIT settled; not measured.
  for (const v of ["ceiling", "geoquota", "rlf"] as const) await run(v, Math.min(500, budget.runMs));

  const results: Record<Variant, Measured[]> = { ceiling: [], geoquota: [], rlf: [] };
  const vsCeiling: number[] = [];
  const vsRlf: number[] = [];
  for (let round = 0; round < budget.rounds; round++) {
    const c = await run("ceiling", budget.runMs);
    const g = await run("geoquota", budget.runMs);
    const r = await run("rlf", budget.runMs);
    results.ceiling.push(c);
    results.geoquota.push(g);
    results.rlf.push(r);
    vsCeiling.push(g.loop.opsPerSecond / c.loop.opsPerSecond);
    vsRlf.push(g.loop.opsPerSecond / r.loop.opsPerSecond);
  }
  await store.close();
  for (const c of Object.values(conns)) c.disconnect();
  return {
    inFlight: IN_FLIGHT,
    keys: KEYS,
    rounds: budget.rounds,
    runMs: budget.runMs,
    ceiling: figures(results.ceiling),
    geoquota: figures(results.geoquota),
    rlf: figures(results.rlf),
    ratioVsCeiling: median(vsCeiling),
    ratioVsRlf: median(vsRlf),
  };
}
