// RLQS on a real region (DESIGN §11, issue 28 step 2): a redis-server, the region's limiter
// service on it and the RLS listener started from a region config with `rls.rlqs`, driven by a
// gRPC client over that listener (the protos Envoy's Go module compiles). A proxy's stream gets
// an assignment that fits the slice for a bucket the RLS's rules match (its map in either
// order), a fresh one before the TTL runs out, DENY_ALL for a bucket nothing matches, and its
// usage reports land in the key's counters (the admissions gossip and the oracle read).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { type RegionService, startRegionService } from "@geoquota/limiter";
import { initFreshRegion, shardOf } from "@geoquota/redis";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  limiterRlqsBackend,
  loadEnvoyConfigs,
  type RegionRls,
  type RlqsAction,
  type RlqsPolicyTarget,
  type RlqsReports,
  type RlqsResponse,
  RlsService,
  RuleSet,
  rlqsApi,
  startRegionRls,
} from "../src/index.js";

const TTL_MS = 1200;
const RENEW_BEFORE_MS = 500;
let redis: RedisServer;
let region: RegionService;
let rls: RegionRls;
let dir: string;
let yaml: string;

beforeAll(async () => {
  redis = await startRedis();
  await initFreshRegion(redis.client());
  dir = mkdtempSync(join(tmpdir(), "gq-rlqs-"));
  yaml = join(dir, "edge.yaml");
  // envoyproxy/ratelimit's format: a limit per tenant on one route (100/s, a token bucket here).
  writeFileSync(
    yaml,
    [
      "domain: edge",
      "descriptors:",
      "  - key: tenant",
      "    descriptors:",
      "      - key: route",
      "        value: checkout",
      "        rate_limit: { unit: second, requests_per_unit: 100 }",
      "",
    ].join("\n"),
  );
  const config = regionConfig({
    assignmentTtlMs: TTL_MS,
    deliveryMarginMs: 200,
    renewBeforeMs: RENEW_BEFORE_MS,
  });
  const policies = parsePolicies({ default: { capacity: 5, refillPerSecond: 0.001 } }, "policies", ["solo"]);
  region = await startRegionService({ config, policies, redis: redis.url });
  const started = await startRegionRls(config, region.limiter);
  if (started === undefined) throw new Error("rls.rlqs set, no RLS started");
  rls = started;
});

function regionConfig(rlqs: Record<string, unknown> | undefined) {
  return parseRegionConfig(
    {
      region: "solo",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: redis.url, timeoutMs: 500 },
      regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
      rls: {
        listen: { host: "127.0.0.1", port: 0 },
        configs: [yaml],
        algorithm: "token_bucket",
        ...(rlqs !== undefined ? { rlqs } : {}),
      },
    },
    { file: "rlqs-test.json", env: {} },
  );
}

afterAll(async () => {
  await rls?.server.close();
  await region?.close();
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** A proxy's stream over the region's listener, every message stamped with its receipt. */
function proxy() {
  const client = new (rlqsApi().Client)(rls.server.address, grpc.credentials.createInsecure());
  const open = client.StreamRateLimitQuotas as () => grpc.ClientDuplexStream<RlqsReports, RlqsResponse>;
  const call = open.call(client);
  const got: { m: RlqsResponse; atMs: number }[] = [];
  const waiters: (() => void)[] = [];
  call.on("data", (m: RlqsResponse) => {
    got.push({ m, atMs: performance.now() });
    for (const w of waiters.splice(0)) w();
  });
  call.on("error", () => {});
  let ended: grpc.StatusObject | undefined;
  call.on("status", (st: grpc.StatusObject) => {
    ended = st;
    for (const w of waiters.splice(0)) w();
  });
  const next = async (count: number) => {
    while (got.length < count) {
      if (ended !== undefined) throw new Error(`stream ended: ${ended.code} ${ended.details}`);
      await new Promise<void>((r) => waiters.push(r));
    }
    return got[count - 1] as { m: RlqsResponse; atMs: number };
  };
  const close = () => {
    call.end();
    client.close();
  };
  return { call, next, close };
}

const entries = (o: Record<string, string>) => ({
  bucket: Object.entries(o).map(([key, value]) => ({ key, value })),
});
const usage = (bucket: ReturnType<typeof entries>, allowed: number, denied: number) => ({
  bucket_id: bucket,
  time_elapsed: { seconds: 1, nanos: 0 },
  num_requests_allowed: allowed,
  num_requests_denied: denied,
});
type Assignment = Extract<RlqsAction, { quota_assignment_action: unknown }>;
const secondsOf = (d: { seconds: number; nanos: number }) => Number(d.seconds) + d.nanos / 1e9;

/** The key the RLS's lookup gives the bucket (the same backend the region mounted). */
function keyOf(domain: string, bucket: Record<string, string>): RlqsPolicyTarget {
  const rules = new RuleSet(loadEnvoyConfigs([yaml]));
  const service = new RlsService(region.limiter, rules, {
    algorithm: "token_bucket",
    nativeDomain: "geoquota",
  });
  const t = limiterRlqsBackend(region.limiter, service).match(domain, bucket);
  if (t.kind !== "policy") throw new Error(`bucket matched ${t.kind}`);
  return t;
}

const counted = async (t: RlqsPolicyTarget) => {
  const { view } = await region.limiter.inspect(t.tenant, t.resource);
  const sum = (m: Readonly<Record<string, number>>) => Object.values(m).reduce((a, b) => a + b, 0);
  return { admitted: sum(view.counters.admitted), denied: sum(view.counters.denied) };
};

it("a proxy's bucket gets a token bucket that fits the slice, renewed before its TTL; its usage lands in the key's counters", async () => {
  // A map: the rule names tenant first, the proxy sends route first (either order matches).
  const bucket = entries({ route: "checkout", tenant: "acme" });
  const key = keyOf("edge", { route: "checkout", tenant: "acme" });
  const p = proxy();
  try {
    p.call.write({ domain: "edge", bucket_quota_usages: [usage(bucket, 0, 0)] });
    const first = await p.next(1);
    const a = first.m.bucket_action[0] as Assignment;
    expect(a.bucket_id.bucket).toEqual(bucket.bucket);
    expect(secondsOf(a.quota_assignment_action.assignment_time_to_live)).toBe(TTL_MS / 1000);
    const s = a.quota_assignment_action.rate_limit_strategy;
    if (!("token_bucket" in s)) throw new Error(`expected a token bucket, got ${JSON.stringify(s)}`);
    // One region holds the whole limit (C 100, r 100/s); before the proxy reported any demand
    // its first assignment asks for half of it (assignmentFraction). The proxy may admit
    // burst + rate·TTL: never more than the slice.
    const tb = s.token_bucket;
    const rate = tb.tokens_per_fill.value / secondsOf(tb.fill_interval);
    expect(tb.max_tokens).toBe(2);
    expect(rate).toBeLessThanOrEqual(50);
    expect(rate).toBeGreaterThan(49);
    // The reservation is in the key's record of leases, as `q|<assignment id>`.
    const leasesKey = `gq:{s${shardOf(key.tenant)}}:${key.tenant}:${key.resource}:k`;
    const held = Object.entries(await redis.client().hgetall(leasesKey));
    expect(held).toHaveLength(1);
    expect(held[0]?.[0]).toMatch(/^q\|/);
    expect(held[0]?.[1]).toMatch(/^0:\d+:500000:2$/);

    const before = await counted(key);
    p.call.write({ domain: "edge", bucket_quota_usages: [usage(bucket, 7, 2)] });
    await expect
      .poll(() => counted(key))
      .toEqual({ admitted: before.admitted + 7, denied: before.denied + 2 });

    // The renewal lands before the proxy's TTL (timed from its receipt) runs out, a new
    // reservation beside the first (its burst starts full), sized from the demand the proxy
    // reported: 9 requests in 1 s, asked with 25% headroom (11.25/s, a burst of a twentieth of a second, at least one token: 1).
    const second = await p.next(2);
    expect(second.atMs - first.atMs).toBeLessThan(TTL_MS);
    const b = second.m.bucket_action[0] as Assignment;
    const s2 = b.quota_assignment_action.rate_limit_strategy;
    if (!("token_bucket" in s2)) throw new Error(`expected a token bucket, got ${JSON.stringify(s2)}`);
    expect(s2.token_bucket.max_tokens).toBe(1);
    const rate2 = s2.token_bucket.tokens_per_fill.value / secondsOf(s2.token_bucket.fill_interval);
    expect(rate2).toBeLessThanOrEqual(11.25);
    expect(rate2).toBeGreaterThan(11);
    const ids = Object.keys(await redis.client().hgetall(leasesKey));
    expect(ids).toHaveLength(2);
  } finally {
    p.close();
  }
});

it("a bucket nothing matches gets DENY_ALL, never an assignment the proxy spends unseen; RLQS reports healthy", async () => {
  const p = proxy();
  try {
    const bucket = entries({ route: "elsewhere", tenant: "acme" });
    p.call.write({ domain: "edge", bucket_quota_usages: [usage(bucket, 0, 0)] });
    const m = await p.next(1);
    expect(m.m.bucket_action[0]).toMatchObject({
      bucket_id: bucket,
      quota_assignment_action: { rate_limit_strategy: { blanket_rule: "DENY_ALL" } },
    });
    const health = new grpc.Client(rls.server.address, grpc.credentials.createInsecure());
    const status = await new Promise<unknown>((resolve, reject) =>
      health.makeUnaryRequest(
        "/grpc.health.v1.Health/Check",
        (x: { service: string }) =>
          Buffer.concat([Buffer.from([10, x.service.length]), Buffer.from(x.service)]),
        (b: Buffer) => b,
        { service: "envoy.service.rate_limit_quota.v3.RateLimitQuotaService" },
        (err, res) => (err ? reject(err) : resolve(res)),
      ),
    );
    health.close();
    // HealthCheckResponse { status: SERVING (1) }.
    expect(status).toEqual(Buffer.from([8, 1]));
  } finally {
    p.close();
  }
});

it("without rls.rlqs the listener has no RLQS (off by default)", async () => {
  const off = await startRegionRls(regionConfig(undefined), region.limiter);
  if (off === undefined) throw new Error("no RLS started");
  const client = new (rlqsApi().Client)(off.server.address, grpc.credentials.createInsecure());
  try {
    expect(off.rlqs).toBeUndefined();
    const open = client.StreamRateLimitQuotas as () => grpc.ClientDuplexStream<RlqsReports, RlqsResponse>;
    const call = open.call(client);
    call.on("error", () => {});
    const st = new Promise<grpc.StatusObject>((r) => call.on("status", r));
    call.write({ domain: "edge", bucket_quota_usages: [] });
    expect((await st).code).toBe(grpc.status.UNIMPLEMENTED);
  } finally {
    client.close();
    await off.server.close();
  }
});
