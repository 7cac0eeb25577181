// A check with cost 0 (issue 22): reads without counting. It is allowed while
// one unit is left, charges nothing, issues no refund receipt, and is denied
// (429, headers as for any denial) once the key is spent — on real Redis, for
// a rate and a window algorithm, single and inside a compound check.
import { parsePolicies } from "@geoquota/config";
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { testConfig } from "./helpers/config.js";
import { TIMING } from "@geoquota/testkit";

const REGION = "us-east";
const SLOW = 0.0001; // no refill within the test

let server: RedisServer;
let app: FastifyInstance;

beforeAll(async () => {
  server = await startRedis();
  const redis = server.client();
  await initFreshRegion(redis);
  app = await limiterApp({
    store: createRedisStore({ redis, region: REGION, timing: TIMING }),
    config: testConfig({ region: REGION, regions: [{ id: REGION, gossip: "127.0.0.1:7301" }] }),
    policies: parsePolicies(
      {
        default: { capacity: 3, refillPerSecond: SLOW },
        policies: [
          { tenant: "*", resource: "win", algorithm: "fixed_window", capacity: 3, windowMs: 600_000 },
        ],
      },
      "check-only.json",
      [REGION],
    ),
  });
});
afterAll(async () => {
  await app?.close();
  await server?.stop();
});

const check = (payload: Record<string, unknown>) => app.inject({ method: "POST", url: "/v1/check", payload });

describe("cost 0: check only", () => {
  it.each(["api", "win"])(
    "resource %s: counts nothing, allowed while one unit is left, denied once spent",
    async (resource) => {
      const key = { tenant: `t_${resource}`, resource };
      const peek = await check({ ...key, cost: 0 });
      expect(peek.statusCode, peek.body).toBe(200);
      expect(peek.json()).toMatchObject({ allowed: true, remaining: 3 });
      expect(peek.json().refundReceipt).toBeUndefined();
      // Three peeks later the key still holds all three units.
      for (let i = 0; i < 3; i++) expect((await check({ ...key, cost: 0 })).json().remaining).toBe(3);
      expect((await check({ ...key, cost: 3 })).statusCode).toBe(200);
      const spent = await check({ ...key, cost: 0 });
      expect(spent.statusCode).toBe(429);
      expect(spent.json()).toMatchObject({ allowed: false, remaining: 0 });
      expect(spent.headers["retry-after"]).toBeDefined();
    },
  );

  it("inside a compound check: the check-only part charges nothing and denies the whole check when spent", async () => {
    const a = { tenant: "ca", resource: "api" };
    const b = { tenant: "cb", resource: "api" };
    const both = await app.inject({
      method: "POST",
      url: "/v1/check",
      payload: {
        limits: [
          { ...a, cost: 1 },
          { ...b, cost: 0 },
        ],
      },
    });
    expect(both.statusCode, both.body).toBe(200);
    expect(both.json().parts.map((p: { remaining: number }) => p.remaining)).toEqual([2, 3]);
    expect((await check({ ...b, cost: 3 })).statusCode).toBe(200);
    const denied = await app.inject({
      method: "POST",
      url: "/v1/check",
      payload: {
        limits: [
          { ...a, cost: 1 },
          { ...b, cost: 0 },
        ],
      },
    });
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toMatchObject({ allowed: false, failedIndex: 1 });
    // Nothing was charged to a by the denied check.
    expect((await check({ ...a, cost: 0 })).json().remaining).toBe(2);
  });

  it("a negative cost is still refused, naming the field", async () => {
    const r = await check({ tenant: "t", resource: "api", cost: -1 });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ code: "GQ_ERR_INVALID_BODY", field: "cost" });
  });
});
