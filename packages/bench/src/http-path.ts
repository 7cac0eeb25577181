// Section 2: POST /v1/check on buildApp over a Limiter on a real store, listening on
// 127.0.0.1, under autocannon (in a child process) at fixed rates and flat
// out. Reference: a route on the same server that runs the ceiling script
// once per request (same Fastify, same Redis), measured alternately. The app
// logs as the service does (runRegion: pino at the config's level, info; no
// request lines unless logRequests), into /dev/null. Node CPU of the server
// (this process) per response is read around every run; the HTTP overhead is
// that, at 1k/s (both routes below saturation) and flat out (per-wakeup costs
// amortized), less the Node CPU of the route's store call alone (store.check;
// the ceiling script's call), measured in a loop of 32 in flight after the
// runs (issue 24 point 3: what the front door costs beyond the store, ours
// against the reference route's).
import { createWriteStream } from "node:fs";
import { fileURLToPath } from "node:url";
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { buildApp, createRedisStore, initFreshRegion, Limiter } from "@geoquota/limiter";
import type { RedisServer } from "@geoquota/procs";
import { bindCeiling } from "./ceiling.js";
import { runChild } from "./child-runner.js";
import { BENCH_REGION, KEYS, TIMING } from "./policies.js";
import type { Budget } from "./types.js";

const RUNNER = fileURLToPath(new URL("./autocannon-runner.mjs", import.meta.url));
export const FIXED_RATES = [1000, 5000] as const;
const MAX_RATE_CONNECTIONS = 32;
const STAGGERED_INSTANCES = 10;

export interface HttpRun {
  readonly route: "geoquota" | "reference";
  /** Asked rate, req/s; 0 = flat out. */
  readonly rate: number;
  readonly achievedPerSecond: number;
  /** 2xx responses per second: the policy admits every check, so anything else is a degraded answer. */
  readonly okPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  /** Node CPU (user + system) of the server process per response during the run, µs. */
  readonly cpuUsPerRequest: number;
}

/** Node CPU µs per request at 1k/s, and of the route's store call alone. */
export interface HttpOverhead {
  readonly rate: number;
  readonly geoquotaRequestUs: number;
  readonly geoquotaStoreCallUs: number;
  readonly referenceRequestUs: number;
  readonly referenceStoreCallUs: number;
  /** Request less store call. */
  readonly geoquotaUs: number;
  readonly referenceUs: number;
}

export interface HttpPathResult {
  readonly durationS: number;
  readonly runs: HttpRun[];
  /**
   * Flat-out 2xx responses per second with 32 connections: the max sustainable rate (a
   * breaker opened by an overloaded machine answers fast 429s, which sustain nothing).
   */
  readonly maxRatePerSecond: number;
  readonly maxRateVsReference: number;
  /** geoquota p99 ÷ reference p99 at 5k req/s. */
  readonly p99VsReferenceAt5k: number;
  /** At 1k/s (both routes below saturation) and flat out (each saturated; per-wakeup costs amortized). */
  readonly overhead: HttpOverhead[];
}

/** Node CPU µs per call of `call(i)`, `n` calls with 32 in flight. */
async function nodeCpuPerCall(n: number, call: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < n) await call(next++);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

export interface RunnerOutput {
  requests: number;
  non2xx: number;
  errors: number;
  latenciesMs: { p50: number; p99: number; p999: number };
}

/** autocannon in a child process: `rate` req/s (0 = flat out, 32 connections) on POST `path`. */
export function autocannon(
  url: string,
  path: string,
  rate: number,
  durationS: number,
): Promise<RunnerOutput> {
  return runChild<RunnerOutput>(
    "autocannon runner",
    RUNNER,
    {
      url,
      path,
      rate,
      durationS,
      connections: MAX_RATE_CONNECTIONS,
      keys: KEYS,
      instances: STAGGERED_INSTANCES,
    },
    durationS,
  );
}

export async function benchHttpPath(server: RedisServer, budget: Budget): Promise<HttpPathResult> {
  const redis = server.client();
  const refRedis = server.client();
  await initFreshRegion(redis);
  const store = createRedisStore({ redis, region: BENCH_REGION, timing: TIMING });
  const config = parseRegionConfig(
    {
      region: BENCH_REGION,
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: server.url, timeoutMs: 50 },
      regions: [{ id: BENCH_REGION, gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 2 }, plaintext: true },
      sharedSecret: "bench-shared-secret-0123456789",
      adminToken: "bench-admin-token-0123456789",
    },
    { file: "bench-region.json", env: {} },
  );
  // Every tenant falls to the default policy, high enough that all checks are admissions.
  const policies = parsePolicies(
    { default: { algorithm: "token_bucket", capacity: 1e9, refillPerSecond: 1e9 } },
    "bench-policies.json",
    [BENCH_REGION],
  );
  // Metrics kept and logging on, as the service keeps them (no request lines: logRequests is off).
  const limiter = new Limiter({ store, config, policies, metrics: true });
  const devNull = createWriteStream("/dev/null");
  const app = await buildApp(limiter, {
    config,
    logger: { level: config.logLevel, base: { region: config.region }, stream: devNull },
    logRequests: config.logRequests,
  });
  const ceiling = bindCeiling(refRedis);
  app.post("/ref/check", async (req) => {
    const body = req.body as { tenant?: unknown } | undefined;
    const r = (await ceiling(`ref:{${String(body?.tenant)}}`, 1e9, 1e9)) as unknown[];
    return { allowed: r[0] === 1 };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  const url = `http://127.0.0.1:${port}`;
  const durationS = Math.max(1, Math.round(budget.runMs / 1000));
  const runs: HttpRun[] = [];
  let storeCallUs = { geoquota: 0, reference: 0 };
  try {
    const once = async (route: HttpRun["route"], rate: number) => {
      const cpu = process.cpuUsage();
      const out = await autocannon(url, route === "geoquota" ? "/v1/check" : "/ref/check", rate, durationS);
      const used = process.cpuUsage(cpu);
      runs.push({
        route,
        rate,
        achievedPerSecond: out.requests / durationS,
        okPerSecond: (out.requests - out.non2xx) / durationS,
        p50Ms: out.latenciesMs.p50,
        p99Ms: out.latenciesMs.p99,
        p999Ms: out.latenciesMs.p999,
        non2xx: out.non2xx,
        errors: out.errors,
        cpuUsPerRequest: out.requests > 0 ? (used.user + used.system) / out.requests : 0,
      });
    };
    if (!budget.smoke) {
      await once("geoquota", FIXED_RATES[0]); // warm-up (JIT, connections), not reported
      runs.length = 0;
    }
    for (const rate of [...FIXED_RATES, 0]) {
      await once("reference", rate);
      await once("geoquota", rate);
    }
    // The store calls alone (the autocannon runs' keys), alternating.
    const calls = budget.smoke ? 2000 : 20_000;
    const storeCall = (i: number) => store.check(limiter.resolve(`h${i % KEYS}`, "api"), 1);
    const ceilingCall = (i: number) => ceiling(`ref:{h${i % KEYS}}`, 1e9, 1e9);
    const geoCalls: number[] = [];
    const refCalls: number[] = [];
    for (let round = 0; round < 2; round++) {
      refCalls.push(await nodeCpuPerCall(calls, ceilingCall));
      geoCalls.push(await nodeCpuPerCall(calls, storeCall));
    }
    storeCallUs = { geoquota: Math.min(...geoCalls), reference: Math.min(...refCalls) };
  } finally {
    await app.close();
    await store.close();
    redis.disconnect();
    refRedis.disconnect();
    devNull.end();
  }
  const find = (route: HttpRun["route"], rate: number) =>
    runs.find((r) => r.route === route && r.rate === rate);
  const geoMax = find("geoquota", 0)?.okPerSecond ?? 0;
  const refMax = find("reference", 0)?.okPerSecond ?? 0;
  const g5 = find("geoquota", 5000)?.p99Ms ?? 0;
  const r5 = find("reference", 5000)?.p99Ms ?? 0;
  const overhead = (rate: number): HttpOverhead => {
    const geoquotaRequestUs = find("geoquota", rate)?.cpuUsPerRequest ?? 0;
    const referenceRequestUs = find("reference", rate)?.cpuUsPerRequest ?? 0;
    return {
      rate,
      geoquotaRequestUs,
      geoquotaStoreCallUs: storeCallUs.geoquota,
      referenceRequestUs,
      referenceStoreCallUs: storeCallUs.reference,
      geoquotaUs: geoquotaRequestUs - storeCallUs.geoquota,
      referenceUs: referenceRequestUs - storeCallUs.reference,
    };
  };
  return {
    durationS,
    runs,
    maxRatePerSecond: geoMax,
    maxRateVsReference: refMax > 0 ? geoMax / refMax : 0,
    p99VsReferenceAt5k: r5 > 0 ? g5 / r5 : 0,
    overhead: [overhead(FIXED_RATES[0]), overhead(0)],
  };
}
