// Section 7: the same region's check through its two front doors — Envoy's rate limit
// service (RLS v3, gRPC: what a gateway calls) beside POST /v1/check (HTTP) — at 1k and
// 5k req/s and flat out. One region as `geoquota region` runs it (startRegionService,
// with `rls` started on its limiter), one real redis-server; each load generator in a
// child process (the HTTP one is section 2's autocannon runner; the gRPC one an
// open-loop @grpc/grpc-js client, grpc-runner.mjs). The paths alternate per rate, so
// drift in the machine's load lands on both. Ratios are gRPC ÷ HTTP; nothing here is
// asserted (the machine is shared).
import { fileURLToPath } from "node:url";
import { parsePolicies, parseRegionConfig, type RegionConfig } from "@geoquota/config";
import { initFreshRegion, startRegionService } from "@geoquota/limiter";
import type { RedisServer } from "@geoquota/procs";
import { type RegionRls, startRegionRls } from "@geoquota/rls";
import { runChild } from "./child-runner.js";
import { autocannon, FIXED_RATES } from "./http-path.js";
import { BENCH_REGION, KEYS } from "./policies.js";
import type { Budget } from "./types.js";

const RUNNER = fileURLToPath(new URL("./grpc-runner.mjs", import.meta.url));
/** In flight at most (fixed rates) and exactly (flat out): the HTTP runner's 32 connections. */
const CONCURRENCY = 32;

export interface RlsRun {
  readonly path: "grpc" | "http";
  /** Asked rate, req/s; 0 = flat out. */
  readonly rate: number;
  /** Decisions answered per second. */
  readonly decisionsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  /** Transport errors, non-2xx / non-OK answers (every check here should be admitted), shed sends. */
  readonly errors: number;
  readonly denied: number;
  readonly shed: number;
}

export interface RlsRatio {
  readonly rate: number;
  /** gRPC ÷ HTTP. */
  readonly decisionsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
}

export interface RlsPathResult {
  readonly durationS: number;
  readonly runs: RlsRun[];
  /** Per rate (1k, 5k, flat out): gRPC ÷ HTTP. */
  readonly ratios: RlsRatio[];
  /** gRPC p99 at 5k req/s (issue 23's target: ≤ 2 ms, a tenth of Envoy's 20 ms default timeout). */
  readonly grpcP99At5kMs: number;
}

export interface GrpcOutput {
  requests: number;
  ok: number;
  overLimit: number;
  errors: number;
  shed: number;
  elapsedS: number;
  latenciesMs: { p50: number; p99: number; p999: number };
}

/** Section 7's gRPC generator (grpc-runner.mjs) against `address` for `durationS`. */
export function grpcLoad(address: string, rate: number, durationS: number): Promise<GrpcOutput> {
  return runChild<GrpcOutput>(
    "gRPC runner",
    RUNNER,
    { address, rate, durationS, concurrency: CONCURRENCY, keys: KEYS },
    durationS,
  );
}

const safeRatio = (a: number, b: number) => (b > 0 ? a / b : 0);

export interface RlsRegion {
  /** The region's HTTP base URL. */
  readonly url: string;
  /** Its config as parsed (defaults filled in). */
  readonly config: RegionConfig;
  readonly rls: RegionRls;
  close(): Promise<void>;
}

/**
 * One region as `geoquota region` runs it, with its RLS listening on loopback (section 11 adds
 * `rls.rlqs` through `rls`). Every key falls to the default policy, high enough that every check
 * is an admission, unless `policies` names it.
 */
export async function startRlsRegion(
  server: RedisServer,
  o: { readonly rls?: Record<string, unknown>; readonly policies?: readonly unknown[] } = {},
): Promise<RlsRegion> {
  const redis = server.client();
  await initFreshRegion(redis);
  redis.disconnect();
  const config = parseRegionConfig(
    {
      region: BENCH_REGION,
      listen: { host: "127.0.0.1", port: 0 },
      // Both paths measure the check, not the breaker: a loaded machine's slow Redis
      // answer is a slow decision here, not a fail-closed denial (counted as `denied`).
      redis: { url: server.url, timeoutMs: 2000 },
      breaker: { failureThreshold: 1000, openMs: 10 },
      regions: [{ id: BENCH_REGION, gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 2 }, plaintext: true },
      sharedSecret: "bench-shared-secret-0123456789",
      adminToken: "bench-admin-token-0123456789",
      logLevel: "warn",
      rls: { listen: { host: "127.0.0.1", port: 0 }, ...o.rls },
    },
    { file: "bench-region.json", env: {} },
  );
  const policies = parsePolicies(
    {
      default: { algorithm: "token_bucket", capacity: 1e9, refillPerSecond: 1e9 },
      ...(o.policies !== undefined ? { policies: o.policies } : {}),
    },
    "bench-policies.json",
    [BENCH_REGION],
  );
  const region = await startRegionService({ config, policies, redis: server.url });
  const rls = await startRegionRls(config, region.limiter).catch(async (err: unknown) => {
    await region.close();
    throw err;
  });
  if (rls === undefined) {
    await region.close();
    throw new Error("bench: the region config has rls, yet no RLS started");
  }
  return {
    url: region.url,
    config,
    rls,
    close: async () => {
      await rls.server.close();
      await region.close();
    },
  };
}

export async function benchRlsPath(server: RedisServer, budget: Budget): Promise<RlsPathResult> {
  const region = await startRlsRegion(server);
  const rls = region.rls;
  const durationS = Math.max(1, Math.round(budget.runMs / 1000));
  const runs: RlsRun[] = [];
  try {
    const once = async (path: RlsRun["path"], rate: number) => {
      if (path === "grpc") {
        const g = await grpcLoad(rls.server.address, rate, durationS);
        runs.push({
          path,
          rate,
          decisionsPerSecond: (g.ok + g.overLimit) / g.elapsedS,
          p50Ms: g.latenciesMs.p50,
          p99Ms: g.latenciesMs.p99,
          p999Ms: g.latenciesMs.p999,
          errors: g.errors,
          denied: g.overLimit,
          shed: g.shed,
        });
      } else {
        const h = await autocannon(region.url, "/v1/check", rate, durationS);
        runs.push({
          path,
          rate,
          decisionsPerSecond: (h.requests - h.errors) / durationS,
          p50Ms: h.latenciesMs.p50,
          p99Ms: h.latenciesMs.p99,
          p999Ms: h.latenciesMs.p999,
          errors: h.errors,
          denied: h.non2xx,
          shed: 0,
        });
      }
    };
    if (!budget.smoke) {
      // Warm-up of both paths (JIT, connections), not reported.
      await once("http", FIXED_RATES[0]);
      await once("grpc", FIXED_RATES[0]);
      runs.length = 0;
    }
    for (const rate of [...FIXED_RATES, 0]) {
      await once("http", rate);
      await once("grpc", rate);
    }
  } finally {
    await region.close();
  }
  const find = (path: RlsRun["path"], rate: number) => runs.find((r) => r.path === path && r.rate === rate);
  const ratios = [...FIXED_RATES, 0].map((rate) => {
    const g = find("grpc", rate);
    const h = find("http", rate);
    return {
      rate,
      decisionsPerSecond: safeRatio(g?.decisionsPerSecond ?? 0, h?.decisionsPerSecond ?? 0),
      p50: safeRatio(g?.p50Ms ?? 0, h?.p50Ms ?? 0),
      p99: safeRatio(g?.p99Ms ?? 0, h?.p99Ms ?? 0),
    };
  });
  return { durationS, runs, ratios, grpcP99At5kMs: find("grpc", 5000)?.p99Ms ?? 0 };
}
