// The demo's example app: the seed's checkout route behind the Fastify plugin,
// in front of a real region's limiter (real Redis). It is not a route of the
// region service any more.
import { join } from "node:path";
import { loadPolicies, parseRegionConfig } from "@geoquota/config";
import { type RegionService, startRegionService } from "@geoquota/limiter";
import { type RedisServer, repoRoot, startRedis } from "@geoquota/testkit";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCheckoutApp, CHECKOUT_PATH } from "../src/demo/checkout-app.js";

const ids = ["us-east", "eu-west", "ap-south"];

describe("demo checkout app (plugin example)", () => {
  let redis: RedisServer;
  let svc: RegionService;
  let app: FastifyInstance;
  beforeAll(async () => {
    redis = await startRedis();
    const config = parseRegionConfig(
      {
        region: "us-east",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: redis.url },
        regions: ids.map((id, i) => ({ id, gossip: `127.0.0.1:${7401 + i}` })),
        gossip: { listen: { host: "127.0.0.1", port: 7401 }, plaintext: true },
        sharedSecret: "demo-test-shared-secret-0123",
        adminToken: "demo-test-admin-token-0123",
      },
      { file: "demo-test.json", env: {} },
    );
    svc = await startRegionService({
      config,
      policies: loadPolicies(join(repoRoot, "regions", "policies.json"), ids),
      fresh: true,
    });
    app = await buildCheckoutApp(svc.limiter);
  });
  afterAll(async () => {
    await app?.close();
    await svc?.close();
    await redis?.stop();
  });

  it("keys by X-Tenant-ID and answers 429 with the rate-limit headers", async () => {
    const post = (tenant?: string) =>
      app.inject({
        method: "POST",
        url: CHECKOUT_PATH,
        headers: tenant === undefined ? {} : { "x-tenant-id": tenant },
        payload: {},
      });
    // cust_free_1018: C = 10, this region's slice 3.33.
    const ok = await post("cust_free_1018");
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ status: "accepted", tenant: "cust_free_1018", region: "us-east" });
    expect(ok.headers["ratelimit-limit"]).toBe("3");
    // (The limiter's own tests parse these fields with a structured-fields library.)
    expect(ok.headers["ratelimit-policy"]).toMatch(
      /^"global";q=10;w=60;pk=:[A-Za-z0-9+/=]+:, "region";q=3;w=60;/,
    );
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await post("cust_free_1018")).statusCode);
    expect(codes).toEqual([200, 200, 429, 429]);
    const denied = await post("cust_free_1018");
    expect(denied.json()).toMatchObject({
      code: "GQ_ERR_RATE_LIMITED",
      allowed: false,
      remaining: 0,
      global: { limit: 10 },
    });
    expect(Number(denied.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    // No header: tenant "anonymous", under payments_checkout's default (tenant "*": C = 5).
    const anon = await post();
    expect(anon.statusCode).toBe(200);
    expect(anon.json().tenant).toBe("anonymous");
    expect(anon.headers["ratelimit-policy"]).toMatch(/^"global";q=5;/);
  });

  it("the region service itself no longer has the route", async () => {
    const res = await fetch(`${svc.url}${CHECKOUT_PATH}`, { method: "POST", body: "{}" });
    expect(res.status).toBe(404);
  });
});
