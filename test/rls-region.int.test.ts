// `geoquota region` with `rls` in its config serves Envoy's RLS, driven by a client nobody
// here wrote: .bin/rls-client, built by the bootstrap from Envoy's Go API module
// (go-control-plane/envoy service/ratelimit/v3) and grpc-go. The config loads
// envoyproxy/ratelimit's own integration config unchanged.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { initFreshRegion } from "@geoquota/redis";
import {
  type ManagedProcess,
  type RedisServer,
  repoRoot,
  spawnManaged,
  startRedis,
  waitFor,
} from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const FIXTURES = join(repoRoot, "packages/rls/test/fixtures/envoyproxy-ratelimit");

interface Line {
  readonly overall?: string;
  readonly statuses?: { code: string; remaining: number; limit?: number; unit?: string }[];
  readonly err?: string;
}

async function client(addr: string, args: readonly string[]): Promise<Line[]> {
  const { stdout } = await run(join(repoRoot, ".bin/rls-client"), ["-addr", addr, ...args]);
  return stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Line);
}

let redis: RedisServer;
let region: ManagedProcess;
let addr: string;
let dir: string;

beforeAll(async () => {
  redis = await startRedis();
  await initFreshRegion(redis.client());
  dir = mkdtempSync(join(tmpdir(), "gq-rls-"));
  // Port 0 for both listeners (no port is picked beforehand, so none can be taken in
  // between): the region logs the address its RLS bound.
  writeFileSync(
    join(dir, "policies.json"),
    JSON.stringify({ default: { capacity: 5, refillPerSecond: 0.001 } }),
  );
  writeFileSync(
    join(dir, "solo.json"),
    JSON.stringify({
      region: "solo",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: redis.url, timeoutMs: 200 },
      regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
      logLevel: "info", // the region logs the address its RLS bound at info
      rls: {
        listen: { host: "127.0.0.1", port: 0 },
        configs: [join(FIXTURES, "integration/basic.yaml"), join(FIXTURES, "integration/another.yaml")],
      },
    }),
  );
  region = spawnManaged(process.execPath, [
    join(repoRoot, "packages/cli/bin/geoquota.mjs"),
    "region",
    "--config",
    join(dir, "solo.json"),
  ]);
  await waitFor(
    "the region's RLS address",
    async () => {
      const m = /rls listening on ([^\s"]+)/.exec(region.output());
      if (m) addr = m[1]!;
      return m !== null;
    },
    30_000,
    100,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${region.output()}`);
  });
  await waitFor(
    "the region's RLS",
    async () => (await client(addr, ["-domain", "basic", "-d", "probe=x"]))[0]?.overall === "OK",
    30_000,
    200,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${region.output()}`);
  });
});

afterAll(async () => {
  await region?.stop();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("geoquota region's RLS through Envoy's generated Go client", () => {
  it("another: key2 20 per minute; the 21st is OVER_LIMIT", async () => {
    const lines = await client(addr, ["-domain", "another", "-d", `key2=${process.pid}`, "-n", "21"]);
    expect(lines.map((l) => l.statuses?.[0]?.remaining)).toEqual([
      ...Array.from({ length: 20 }, (_, i) => 19 - i),
      0,
    ]);
    expect(lines.slice(0, 20).every((l) => l.overall === "OK")).toBe(true);
    expect(lines[20]).toMatchObject({
      overall: "OVER_LIMIT",
      statuses: [{ code: "OVER_LIMIT", limit: 20, unit: "MINUTE" }],
    });
  });

  it("per-descriptor hits_addend and a limit override arrive as Envoy's types send them", async () => {
    const v = `o${process.pid}`;
    const lines = await client(addr, [
      "-domain",
      "another",
      "-d",
      `key4=${v};hits=5`,
      "-d",
      `tenant=${v};limit=2/HOUR`,
      "-n",
      "3",
    ]);
    expect(lines.map((l) => l.overall)).toEqual(["OK", "OK", "OVER_LIMIT"]);
    expect(lines[0]!.statuses).toMatchObject([
      { code: "OK", remaining: 15, limit: 20, unit: "DAY" },
      { code: "OK", remaining: 1, limit: 2, unit: "HOUR" },
    ]);
    // The third: the override is over, so key4 is not charged (it still holds 20 − 10).
    expect(lines[2]!.statuses).toMatchObject([
      { code: "OK", remaining: 10 },
      { code: "OVER_LIMIT", remaining: 0 },
    ]);
  });

  it("an invalid request reaches the client as a gRPC status error, not a response", async () => {
    const lines = await client(addr, ["-domain", "", "-d", "key2=x"]);
    expect(lines[0]).toMatchObject({ err: "InvalidArgument" });
    expect(lines[0]!.overall).toBeUndefined();
  });
});
