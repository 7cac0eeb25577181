// Section 3: the leased in-process path (LeasedClient.tryTake, awaiting one
// acquire only when the held leases run dry) against rate-limiter-flexible's
// RateLimiterMemory, alternating runs, 1,000 keys. Variants: the region
// config's `leased` defaults (batch 50 sized from the observed rate up to
// `maxBatch` 5000) as the service runs them, one `LeasePool.get` per decision
// (`Limiter.check` looks the key's client up on every check); the same defaults
// for a caller that holds its clients (an embedding that keeps one
// `LeasedClient` per key: no lookup per decision, the headline); and a fixed
// batch of 50 (`maxBatch: 50`), what leased mode gave before sizing was the
// default. Redis ops per decision come from INFO commandstats.
import { type LeasedConfig, leasedDefaults } from "@geoquota/config";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { LeasePool } from "@geoquota/limiter/internal";
import type { RedisServer } from "@geoquota/procs";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { median } from "./closed-loop.js";
import { Histogram } from "./histogram.js";
import { BENCH_REGION, benchPolicies, KEYS, TIMING } from "./policies.js";
import { commandStats, statsBetween } from "./redis-stats.js";
import type { Budget, LatencySummary } from "./types.js";

const MAX_OPS_PER_RUN = 50_000_000;
/** The region config's `leased` block when a deployment writes only `enabled: true`. */
const DEFAULTS: LeasedConfig = { ...leasedDefaults(), enabled: true };

/** One variant: the `leased` block it runs, and whether the caller holds its clients. */
interface VariantSpec {
  readonly leased: LeasedConfig;
  /** The config's defaults, untouched. */
  readonly configDefault: boolean;
  readonly held: boolean;
}

const VARIANTS: readonly VariantSpec[] = [
  { leased: DEFAULTS, configDefault: true, held: false },
  { leased: DEFAULTS, configDefault: true, held: true },
  { leased: { ...DEFAULTS, maxBatch: DEFAULTS.batch }, configDefault: false, held: false },
];
const SEQUENCE = 1 << 16;
/** Unmeasured warm-up before each measured run. */
const WARM_MS = 1000;

/**
 * A fixed pseudo-random key order (LCG, seeded): round-robin would drain
 * every key's lease in the same instant and turn prefetches into waves.
 */
function keySequence(seed = 12345): Uint16Array {
  const out = new Uint16Array(SEQUENCE);
  let x = seed >>> 0;
  for (let i = 0; i < SEQUENCE; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = x % KEYS;
  }
  return out;
}

export interface InProcessFigures extends LatencySummary {
  readonly decisionsPerSecond: number;
  readonly decisions: number;
}

export interface LeasedVariant {
  readonly leaseBatch: number;
  /** Ceiling of the rate-sized batch (= leaseBatch: fixed). */
  readonly maxBatch: number;
  /** The region config's `leased` defaults (with `enabled: true`), untouched. */
  readonly configDefault: boolean;
  /** The caller holds one LeasedClient per key (no LeasePool.get per decision). */
  readonly heldClients: boolean;
  readonly geoquota: InProcessFigures;
  readonly ratioVsRlfMemory: number;
  /** Script round-trips (acquire + release) per decision. */
  readonly redisOpsPerDecision: number;
  /** Decisions per Redis round-trip (target ≥ 40). */
  readonly decisionsPerRedisOp: number;
}

export interface LeasedPathResult {
  readonly keys: number;
  readonly rlfMemory: InProcessFigures;
  /** The config's defaults through the pool and with held clients (the headline), a fixed batch. */
  readonly variants: LeasedVariant[];
}

export interface Run {
  readonly ops: number;
  readonly elapsedMs: number;
  readonly hist: Histogram;
}

/** Requests a server would have open at once: a dry key's wait must not stall the others. */
const WORKERS = 64;

/**
 * Decisions from WORKERS concurrent loops, each timed. `syncTake` answers
 * without awaiting when it can (the leased hot path is synchronous); `slow`
 * is awaited otherwise. Loops yield every 256 decisions so socket replies
 * (prefetched leases) and timers get their turn, as they would between requests.
 * Also section 11's local RLQS bucket (its stream's messages get those turns).
 */
export async function loop(
  durationMs: number,
  syncTake: ((i: number) => boolean) | undefined,
  slow: (i: number) => Promise<unknown>,
): Promise<Run> {
  const hist = new Histogram();
  const start = performance.now();
  const deadline = start + durationMs;
  let next = 0;
  const worker = async () => {
    let t = performance.now();
    let mine = 0;
    while (next < MAX_OPS_PER_RUN && t < deadline) {
      const i = next++;
      if (syncTake === undefined || !syncTake(i)) await slow(i);
      const end = performance.now();
      hist.record((end - t) * 1000);
      t = end;
      if ((++mine & 255) === 0) {
        await new Promise<void>((r) => setImmediate(r));
        t = performance.now();
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return { ops: hist.count, elapsedMs: performance.now() - start, hist };
}

export function summary(runs: Run[]): InProcessFigures {
  const hist = new Histogram();
  let ops = 0;
  let ms = 0;
  for (const r of runs) {
    hist.merge(r.hist);
    ops += r.ops;
    ms += r.elapsedMs;
  }
  return {
    decisionsPerSecond: ops / (ms / 1000),
    decisions: ops,
    p50Us: hist.quantileUs(0.5),
    p99Us: hist.quantileUs(0.99),
    p999Us: hist.quantileUs(0.999),
  };
}

export async function benchLeasedPath(server: RedisServer, budget: Budget): Promise<LeasedPathResult> {
  const rlf = new RateLimiterMemory({ points: 1e9, duration: 1 });
  const seq = keySequence();
  const rlfSlow = (i: number) => rlf.consume(`t${seq[i & (SEQUENCE - 1)]!}`, 1);
  const rlfRuns: Run[] = [];
  const variants: LeasedVariant[] = [];
  for (const spec of VARIANTS) {
    const { variant, rlfRuns: rr } = await benchBatch(server, budget, spec, seq, rlfSlow);
    variants.push(variant);
    rlfRuns.push(...rr);
  }
  return { keys: KEYS, rlfMemory: summary(rlfRuns), variants };
}

async function benchBatch(
  server: RedisServer,
  budget: Budget,
  spec: VariantSpec,
  seq: Uint16Array,
  rlfSlow: (i: number) => Promise<unknown>,
): Promise<{ variant: LeasedVariant; rlfRuns: Run[] }> {
  const redis = server.client();
  const stats = server.client();
  await redis.flushall();
  await initFreshRegion(redis);
  const store = createRedisStore({ redis, region: BENCH_REGION, timing: TIMING });
  const { batch, lowWater, maxBatch, durationMs, marginMs, maxKeys } = spec.leased;
  // As Limiter builds its pool from the config's `leased` block.
  const pool = new LeasePool(store, { batch, lowWater, maxBatch, durationMs, marginMs, maxKeys });
  const policies = benchPolicies();
  const policyOf = (i: number) => policies[seq[i & (SEQUENCE - 1)]!]!;
  const clients = policies.map((p) => pool.get(p));
  const clientOf = (i: number) => clients[seq[i & (SEQUENCE - 1)]!]!;
  const sync = spec.held
    ? (i: number) => clientOf(i).tryTake(1)
    : (i: number) => pool.get(policyOf(i)).tryTake(1);
  const slow = spec.held ? (i: number) => clientOf(i).take(1) : (i: number) => pool.get(policyOf(i)).take(1);

  const g: Run[] = [];
  const r: Run[] = [];
  const ratios: number[] = [];
  const before = await commandStats(stats);
  // Steady demand (issue 24 point 4): each measured run follows an unmeasured warm-up of the
  // same path, so leases that ended while the other side ran are not the figure.
  const warmMs = Math.min(WARM_MS, budget.runMs);
  for (let round = 0; round < budget.rounds; round++) {
    await loop(warmMs, sync, slow);
    const gr = await loop(budget.runMs, sync, slow);
    await loop(warmMs, undefined, rlfSlow);
    const rr = await loop(budget.runMs, undefined, rlfSlow);
    g.push(gr);
    r.push(rr);
    ratios.push(gr.ops / gr.elapsedMs / (rr.ops / rr.elapsedMs));
  }
  // Returning the leases is part of their cost: count the releases too.
  await pool.close();
  const delta = statsBetween(before, await commandStats(stats));
  await store.close();
  redis.disconnect();
  stats.disconnect();
  const decisions = g.reduce((a, x) => a + x.ops, 0);
  const ops = delta.scriptCalls;
  return {
    variant: {
      leaseBatch: batch,
      maxBatch,
      configDefault: spec.configDefault,
      heldClients: spec.held,
      geoquota: summary(g),
      ratioVsRlfMemory: median(ratios),
      redisOpsPerDecision: decisions > 0 ? ops / decisions : 0,
      decisionsPerRedisOp: ops > 0 ? decisions / ops : 0,
    },
    rlfRuns: r,
  };
}
