// Two regions of a real local cluster (startCluster: per region a Redis, a
// limiter and a gossip daemon): one connection of the same tenant in each
// region, each metered by a stream server whose leases come from its own
// region's Redis. Together they stay within the tenant's global byte rate
// (exact oracle over both connections' admissions). A cross-package test (it
// needs the CLI's cluster, which sits above the stream package), so it lives
// here rather than in packages/stream/test.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Cluster, startCluster } from "@geoquota/cli";
import { connectRegionRedis, createRedisStore } from "@geoquota/limiter";
import { checkGlobalBound } from "@geoquota/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ExampleServer, runFloodClient, startExampleServer } from "@geoquota/stream";
import { Recorder, range, streamPolicies, streamPoliciesJson } from "../packages/stream/test/helpers.js";

const LIMITS = {
  bytes: { capacity: 32 * 1024, refillPerSecond: 64 * 1024 },
  frames: { capacity: 10_000, refillPerSecond: 10_000 },
};
const TIMING = { epsilonUs: 250_000, loanDurationUs: 3_000_000 };

let cluster: Cluster;
let dir: string;
const redisConns: ReturnType<typeof connectRegionRedis>[] = [];
const servers: ExampleServer[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "geoquota-stream-"));
  const policiesFile = join(dir, "policies.json");
  writeFileSync(policiesFile, JSON.stringify(streamPoliciesJson(LIMITS)));
  cluster = await startCluster({ regions: 2, policiesFile });
}, 120_000);

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  for (const r of redisConns) await r.quit().catch(() => r.disconnect());
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it("one tenant, two regions, two connections: together within C + r·T of the global byte limit", async () => {
  const rec = new Recorder();
  const ids = cluster.regions.map((r) => r.id);
  const policies = streamPolicies(LIMITS);
  for (const region of cluster.regions) {
    const redis = connectRegionRedis(region.redis);
    redisConns.push(redis);
    servers.push(
      await startExampleServer({
        store: createRedisStore({ redis, region: region.id, timing: TIMING }),
        policies,
        regions: ids,
        regionId: region.id,
        connectionShare: 1,
        onFrame: (tenant, data, info) => rec.onFrame(`${tenant}@${region.id}`, data, info),
        reportIntervalMs: 0,
      }),
    );
  }
  const durationMs = 4000;
  const results = await Promise.all(
    servers.map((s) =>
      runFloodClient({
        url: s.url,
        tenant: "cust_stream",
        frameBytes: 1024,
        bytesPerSecond: Number.POSITIVE_INFINITY,
        durationMs,
        bufferedBytesMax: 1024 * 1024,
      }),
    ),
  );
  for (const [i, region] of cluster.regions.entries()) {
    const seqs = rec.seqsOf((d) => d.tenant === `cust_stream@${region.id}`);
    expect(seqs.length).toBeGreaterThan(0);
    expect(seqs).toEqual(range(seqs.length)); // in order, no gap
    expect(results[i]!.sentFrames).toBeGreaterThan(seqs.length); // both were held back
  }
  const v = checkGlobalBound(rec.admissions("bytes"), LIMITS.bytes);
  expect(v.worstExcess).toBeLessThanOrEqual(1e-9);
  expect(v.ok).toBe(true);
  // Both regions were busy all along: together they used most of the global rate.
  const seconds = durationMs / 1000;
  expect(v.admitted).toBeGreaterThan(0.7 * (LIMITS.bytes.capacity + LIMITS.bytes.refillPerSecond * seconds));
}, 60_000);
