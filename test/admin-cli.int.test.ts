// `geoquota policy reset TENANT RESOURCE` and `geoquota policy history` as a black box (the
// built CLI) against one region's limiter on a real Redis: the reset empties the key in that
// region, and every admin change (the CLI's `set` and `reset`) is in the region's audit list
// with the actor the CLI names (GEOQUOTA_ACTOR).
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { type RegionService, startRegionService } from "@geoquota/limiter";
import { type RedisServer, runCli, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const TOKEN = "test-admin-token-0123456789";

/** `geoquota policy <args…>` through the built CLI (the test kit's runner). */
const cli = (args: string[], env: Record<string, string> = {}) => runCli(["policy", ...args], env);

describe("geoquota policy reset / history", () => {
  let redis: RedisServer;
  let svc: RegionService;
  beforeAll(async () => {
    redis = await startRedis();
    const config = parseRegionConfig(
      {
        region: "us-east",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: redis.url, timeoutMs: 200 },
        regions: [{ id: "us-east", gossip: "127.0.0.1:1" }],
        gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
        sharedSecret: "test-shared-secret-0123456789",
        adminToken: TOKEN,
      },
      { file: "test.json", env: {} },
    );
    const doc = { default: { capacity: 5, refillPerSecond: 0.0001 }, policies: [] };
    const policies = parsePolicies(doc, "policies.json", ["us-east"]);
    svc = await startRegionService({ config, policies, policiesDocument: doc, fresh: true });
  }, 30_000);
  afterAll(async () => {
    await svc?.close();
    await redis?.stop();
  });

  const url = () => ["--url", svc.url, "--token", TOKEN];
  const check = async (tenant: string) =>
    (
      await fetch(`${svc.url}/v1/check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ tenant, resource: "api" }),
      })
    ).status;

  it("reset empties the key in the region; history lists set and reset with the actor", async () => {
    const email = "user:123@example.com";
    const set = await cli(["set", email, "api", '{"capacity":4,"refillPerSecond":0.0001}', ...url()], {
      GEOQUOTA_ACTOR: "carol",
    });
    expect(set.code, set.err).toBe(0);
    expect(await check(email)).toBe(200);
    const reset = await cli(["reset", email, "api", ...url()], { GEOQUOTA_ACTOR: "carol" });
    expect(reset.code, reset.err).toBe(0);
    expect(reset.out).toMatch(
      /^reset user:123@example\.com\/api in us-east: 3(\.\d+)? -> 0 \(refills from now/,
    );
    expect(await check(email)).toBe(429);

    const h = await cli(["history", "--json", ...url()]);
    expect(h.code, h.err).toBe(0);
    const records = (JSON.parse(h.out) as { records: Record<string, unknown>[] }).records;
    expect(records.map((r) => [r.actor, r.method, r.route])).toEqual([
      ["carol", "POST", "/v1/quotas/:tenant/:resource/reset"],
      ["carol", "PUT", "/v1/policies/:tenant/:resource"],
    ]);
    const text = await cli(["history", "--limit", "1", ...url()]);
    expect(text.code, text.err).toBe(0);
    expect(text.out).toMatch(
      /^# region us-east: 1 admin changes, newest first\n.*carol from 127\.0\.0\.1 {2}POST .*tokens 3(\.\d+)? -> 0\n$/,
    );
    const bad = await cli(["history", "--limit", "0", ...url()]);
    expect(bad.code).toBe(2);
  });
});
