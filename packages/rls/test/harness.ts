// One region (a real redis-server, the limiter service on it) with the RLS in front, and a
// gRPC client of Envoy's API (the same protos), for the RLS tests.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { type RegionService, startRegionService } from "@geoquota/limiter";
import { initFreshRegion } from "@geoquota/redis";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import {
  loadEnvoyConfigs,
  type RlsOptions,
  type RlsResponse,
  type RlsServer,
  RlsService,
  RuleSet,
  rlsApi,
  startRlsServer,
} from "../src/index.js";

export const FIXTURES = fileURLToPath(new URL("./fixtures/envoyproxy-ratelimit/", import.meta.url));

export interface Descriptor {
  readonly entries: readonly (readonly [string, string])[];
  readonly hitsAddend?: number;
  readonly limit?: { readonly requests_per_unit: number; readonly unit: string };
}

export interface RlsRig {
  readonly redis: RedisServer;
  readonly region: RegionService;
  readonly server: RlsServer;
  readonly client: grpc.Client;
  call(domain: string, descriptors: readonly Descriptor[], hitsAddend?: number): Promise<RlsResponse>;
  /** The raw call: resolves with the gRPC error instead of throwing. */
  raw(request: unknown): Promise<{ err: grpc.ServiceError | null; res: RlsResponse | undefined }>;
  stop(): Promise<void>;
}

export function rlsRequest(domain: string, descriptors: readonly Descriptor[], hitsAddend = 0) {
  return {
    domain,
    hits_addend: hitsAddend,
    descriptors: descriptors.map((d) => ({
      entries: d.entries.map(([key, value]) => ({ key, value })),
      ...(d.hitsAddend !== undefined ? { hits_addend: { value: d.hitsAddend } } : {}),
      ...(d.limit !== undefined ? { limit: d.limit } : {}),
    })),
  };
}

export async function startRig(
  files: readonly string[],
  options: Partial<RlsOptions> & { failMode?: "closed" | "open"; policies?: unknown } = {},
): Promise<RlsRig> {
  const redis = await startRedis();
  const stops: (() => Promise<void>)[] = [() => redis.stop()];
  try {
    await initFreshRegion(redis.client());
    const config = parseRegionConfig(
      {
        region: "solo",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: redis.url, timeoutMs: 200 },
        regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
        gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
        sharedSecret: "test-shared-secret-0123456789",
        adminToken: "test-admin-token-0123456789",
        breaker: { failureThreshold: 1, openMs: 60_000 },
        ...(options.failMode !== undefined ? { failMode: options.failMode } : {}),
      },
      { file: "rls-test.json", env: {} },
    );
    const policies = parsePolicies(
      options.policies ?? { default: { capacity: 5, refillPerSecond: 0.001 } },
      "policies",
      ["solo"],
    );
    const region = await startRegionService({ config, policies, redis: redis.url });
    stops.unshift(() => region.close());
    const rules = new RuleSet(loadEnvoyConfigs(files.map((f) => `${FIXTURES}${f}`)));
    const service = new RlsService(region.limiter, rules, {
      algorithm: options.algorithm ?? "fixed_window",
      ...(options.burst !== undefined ? { burst: options.burst } : {}),
      nativeDomain: options.nativeDomain ?? "geoquota",
    });
    const server = await startRlsServer({ service, host: "127.0.0.1", port: 0 });
    stops.unshift(() => server.close());
    const client = new (rlsApi().Client)(server.address, grpc.credentials.createInsecure());
    stops.unshift(async () => client.close());
    const raw = (request: unknown) =>
      new Promise<{ err: grpc.ServiceError | null; res: RlsResponse | undefined }>((resolve) => {
        (
          client as unknown as Record<
            string,
            (r: unknown, cb: (e: grpc.ServiceError | null, v?: RlsResponse) => void) => void
          >
        ).ShouldRateLimit!.call(client, request, (err, res) => resolve({ err, res }));
      });
    return {
      redis,
      region,
      server,
      client,
      raw,
      async call(domain, descriptors, hitsAddend) {
        const { err, res } = await raw(rlsRequest(domain, descriptors, hitsAddend));
        if (err !== null) throw err;
        return res as RlsResponse;
      },
      async stop() {
        for (const s of stops) await s().catch(() => undefined);
      },
    };
  } catch (err) {
    for (const s of stops) await s().catch(() => undefined);
    throw err;
  }
}
