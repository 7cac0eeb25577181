// The policies file's operator features through the HTTP API on a real Redis
// (issue 15 item 3): shadow policies (decided, counted, reported as wouldDeny,
// never denied), allow and deny lists (answered without the store: a spy counts
// every store call), per-key overrides (the given field applies, the rest is
// inherited), and a policy this limiter no longer knows (fail closed).
import { type PolicySet, parsePolicies } from "@geoquota/config";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import type { FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import type { RegionStore } from "@geoquota/core";
import { CheckResponseSchema } from "../src/validation.js";
import { ADMIN_TOKEN, manualClock, testConfig } from "./helpers/config.js";
import { expectHeadersMatchBody } from "./helpers/rate-limit-fields.js";
import { TIMING } from "@geoquota/testkit";

const REGION = "us-east";
// Refill is negligible over a test, so admissions are counted exactly.
const SLOW = 0.0001;

function policies(): PolicySet {
  return parsePolicies(
    {
      default: { capacity: 5, refillPerSecond: SLOW },
      policies: [
        { tenant: "*", resource: "shadowed", capacity: 3, refillPerSecond: SLOW, shadow: true },
        { tenant: "t", resource: "api", capacity: 100, refillPerSecond: SLOW },
        { tenant: "*", resource: "win", algorithm: "fixed_window", capacity: 10, windowMs: 600_000 },
      ],
      allow: [{ tenant: "vip" }, { key: "*/health*" }],
      deny: [{ tenant: "abuser" }, { key: "vip/admin_*" }],
      overrides: [
        { tenant: "t", resource: "api", capacity: 2 },
        { tenant: "small", resource: "win", capacity: 4 },
      ],
    },
    "test-policies.json",
    [REGION],
  );
}

let server: RedisServer;
let redis: Redis;
const apps: FastifyInstance[] = [];

/** Every call the app makes to its store, by method name. */
function spied(store: RegionStore): { store: RegionStore; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

async function regionApp(set: PolicySet | readonly PolicySet[] = policies()) {
  const { store, calls } = spied(createRedisStore({ redis, region: REGION, timing: TIMING }));
  const clock = manualClock();
  const app = await limiterApp({
    store,
    config: testConfig({ region: REGION, regions: [{ id: REGION, gossip: "127.0.0.1:7301" }] }),
    policies: set,
    clock: clock.now,
  });
  apps.push(app);
  return { app, calls, clock };
}

const check = (app: FastifyInstance, payload: Record<string, unknown>) =>
  app.inject({ method: "POST", url: "/v1/check", payload });

async function metric(app: FastifyInstance, series: string): Promise<number> {
  const text = (await app.inject({ method: "GET", url: "/metrics" })).body;
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function admitted(app: FastifyInstance, tenant: string, resource: string) {
  const view = (await app.inject({ method: "GET", url: `/v1/quotas/${tenant}/${resource}` })).json() as {
    counters: { admitted: Record<string, number>; denied: Record<string, number> };
    policy: Record<string, unknown>;
  };
  const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
  return { admitted: sum(view.counters.admitted), denied: sum(view.counters.denied), policy: view.policy };
}

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
});
afterAll(async () => {
  for (const a of apps) await a.close();
  await server?.stop();
});

describe("shadow policy", () => {
  it("decides as usual, never denies, reports wouldDeny and counts it", async () => {
    const { app } = await regionApp();
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await check(app, { tenant: "s1", resource: "shadowed" }));
    for (const res of answers) {
      expect(res.statusCode).toBe(200);
      expect(res.headers["retry-after"]).toBeUndefined();
      const body = res.json();
      CheckResponseSchema.parse(body);
      expect(body.allowed).toBe(true);
      expectHeadersMatchBody(res.headers, body);
    }
    expect(answers.map((r) => r.json().wouldDeny)).toEqual([false, false, false, true, true]);
    // The would-denies charged nothing (the script denied them): 3 admitted, 2 denied.
    expect(answers[4]!.json().remaining).toBe(0);
    expect(answers[4]!.json().refundReceipt).toBeUndefined();
    expect(await admitted(app, "s1", "shadowed")).toMatchObject({ admitted: 3, denied: 2 });
    expect(await metric(app, 'geoquota_shadow_decisions_total{result="would_deny",source="store"}')).toBe(2);
    expect(await metric(app, 'geoquota_shadow_decisions_total{result="allowed",source="store"}')).toBe(3);
    expect(await metric(app, 'geoquota_decisions_total{result="allowed",source="store"}')).toBe(5);
    expect(await metric(app, 'geoquota_decisions_total{result="denied",source="store"}')).toBe(0);
    // A key without shadow is denied as usual, and carries no wouldDeny.
    for (let i = 0; i < 5; i++) await check(app, { tenant: "s1", resource: "plain" });
    const denied = await check(app, { tenant: "s1", resource: "plain" });
    expect(denied.statusCode).toBe(429);
    expect(denied.json().wouldDeny).toBeUndefined();
  });

  it("compound: a shadow limit never denies the check; the enforced limits still do", async () => {
    const { app } = await regionApp();
    for (let i = 0; i < 3; i++) await check(app, { tenant: "s2", resource: "shadowed" });
    const ok = await check(app, {
      limits: [
        { tenant: "s2", resource: "plain" },
        { tenant: "s2", resource: "shadowed" },
      ],
    });
    expect(ok.statusCode).toBe(200);
    const body = ok.json();
    CheckResponseSchema.parse(body);
    expect(body).toMatchObject({ allowed: true, failedIndex: -1, wouldDeny: true });
    expect(body.parts[1]).toMatchObject({ allowed: true, wouldDeny: true });
    expect(body.parts[0].wouldDeny).toBeUndefined();
    // The enforced limit was charged; the shadow one that would deny was not.
    expect((await admitted(app, "s2", "plain")).admitted).toBe(1);
    expect((await admitted(app, "s2", "shadowed")).admitted).toBe(3);
    for (let i = 0; i < 4; i++) await check(app, { tenant: "s2", resource: "plain" });
    const no = await check(app, {
      limits: [
        { tenant: "s2", resource: "shadowed" },
        { tenant: "s2", resource: "plain" },
      ],
    });
    expect(no.statusCode).toBe(429);
    expect(no.json()).toMatchObject({ allowed: false, failedIndex: 1 });
  });
});

describe("allow and deny lists", () => {
  it("allow list: 200 without touching the store, headers consistent with the body", async () => {
    const { app, calls } = await regionApp();
    const n = calls.length;
    for (let i = 0; i < 20; i++) {
      const res = await check(app, { tenant: "vip", resource: "payments", cost: 3 });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      CheckResponseSchema.parse(body);
      expect(body).toMatchObject({ allowed: true, reason: "allow_list", degraded: false, remaining: 5 });
      expectHeadersMatchBody(res.headers, body);
    }
    const glob = await check(app, { tenant: "anyone", resource: "healthz" });
    expect(glob.json()).toMatchObject({ allowed: true, reason: "allow_list" });
    const compound = await check(app, {
      limits: [
        { tenant: "vip", resource: "a" },
        { tenant: "x", resource: "health" },
      ],
    });
    expect(compound.statusCode).toBe(200);
    expect(compound.json().parts.map((p: { reason: string }) => p.reason)).toEqual([
      "allow_list",
      "allow_list",
    ]);
    expect(calls.slice(n)).toEqual([]);
    expect(await metric(app, 'geoquota_decisions_total{result="allowed",source="allow_list"}')).toBe(23);
    // Not on the list: the store decides.
    expect((await check(app, { tenant: "someone", resource: "payments" })).json().reason).toBeUndefined();
    expect(calls.slice(n)).toEqual(["check"]);
  });

  it("deny list: 403 with the decision fields, no Retry-After, without touching the store; deny wins", async () => {
    const { app, calls } = await regionApp();
    const n = calls.length;
    for (const key of [
      { tenant: "abuser", resource: "payments" },
      { tenant: "abuser", resource: "health" },
      { tenant: "vip", resource: "admin_delete" },
    ]) {
      const res = await check(app, key);
      expect(res.statusCode).toBe(403);
      const body = res.json();
      CheckResponseSchema.parse(body);
      expect(body).toMatchObject({ allowed: false, reason: "deny_list", remaining: 0, retryAfterSeconds: 0 });
      expect(res.headers["retry-after"]).toBeUndefined();
      expect(res.headers.ratelimit).toBeUndefined();
    }
    const compound = await check(app, {
      limits: [
        { tenant: "t", resource: "api" },
        { tenant: "abuser", resource: "api" },
      ],
    });
    expect(compound.statusCode).toBe(403);
    expect(compound.json()).toMatchObject({ allowed: false, failedIndex: 1, reason: "deny_list" });
    expect(compound.json().parts[0]).toMatchObject({ allowed: false, reason: "not_evaluated" });
    expect(calls.slice(n)).toEqual([]);
    expect(await metric(app, 'geoquota_decisions_total{result="denied",source="deny_list"}')).toBe(5);
  });
});

describe("overrides", () => {
  it("the overridden field applies; the others come from the policy it overrides", async () => {
    const { app } = await regionApp();
    // t/api: capacity 100 → 2 by the override; refill inherited.
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await check(app, { tenant: "t", resource: "api" })).statusCode);
    expect(statuses).toEqual([200, 200, 429]);
    const view = await admitted(app, "t", "api");
    expect(view.policy).toMatchObject({ algorithm: "token_bucket", capacity: 2, refillPerSecond: SLOW });
    // small/win: the (*, win) fixed window with capacity 4; its window inherited.
    const win = [];
    for (let i = 0; i < 5; i++) win.push(await check(app, { tenant: "small", resource: "win" }));
    expect(win.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 429]);
    expect(win[0]!.json().global.limit).toBe(4);
    expect((await admitted(app, "small", "win")).policy).toMatchObject({
      algorithm: "fixed_window",
      capacity: 4,
      windowMs: 600_000,
    });
    // Another tenant on the same resource keeps the resource's policy.
    expect((await check(app, { tenant: "big", resource: "win" })).json().global.limit).toBe(10);
  });
});

describe("policy unknown", () => {
  it("past setPolicyValidUntil, or before any set: fail closed (held leases, else deny), lists included", async () => {
    const { app, clock, calls } = await regionApp();
    app.limiter.setPolicyValidUntil(clock.now() + 100);
    expect((await check(app, { tenant: "u1", resource: "api" })).statusCode).toBe(200);
    clock.advance(101);
    const n = calls.length;
    for (const key of [
      { tenant: "u1", resource: "api" },
      { tenant: "vip", resource: "payments" },
    ]) {
      const res = await check(app, key);
      expect(res.statusCode).toBe(429);
      expect(res.json()).toMatchObject({ allowed: false, reason: "policy_unknown", degraded: true });
      expectHeadersMatchBody(res.headers, res.json());
    }
    expect(calls.slice(n)).toEqual([]);
    expect(await metric(app, 'geoquota_decisions_total{result="denied",source="policy_unknown"}')).toBe(2);
    app.limiter.setPolicyValidUntil(undefined);
    expect((await check(app, { tenant: "u1", resource: "api" })).statusCode).toBe(200);

    const { app: fresh } = await regionApp([]);
    const res = await check(fresh, { tenant: "u1", resource: "api" });
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ reason: "policy_unknown", global: { limit: 0 } });
    const list = await fresh.inject({
      method: "GET",
      url: "/v1/policies",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(list.statusCode).toBe(503);
    expect(list.json().code).toBe("GQ_ERR_POLICY_UNKNOWN");
    fresh.limiter.setPolicies(policies());
    expect((await check(fresh, { tenant: "u2", resource: "api" })).statusCode).toBe(200);
  });
});

describe("policy versions (a rollout in progress)", () => {
  it("the limiter enforces the meet of the versions it holds: lists, shadow and limits", async () => {
    const version = (capacity: number, extra: Record<string, unknown>) =>
      parsePolicies(
        {
          default: { capacity, refillPerSecond: SLOW },
          policies: [{ tenant: "*", resource: "sh", capacity, refillPerSecond: SLOW, shadow: true }],
          ...extra,
        },
        "v.json",
        [REGION],
      );
    const v1 = version(2, {
      deny: [{ tenant: "old_bad" }],
      allow: [{ tenant: "both" }, { tenant: "leaving" }],
    });
    const v2 = version(100, { allow: [{ tenant: "both" }, { tenant: "old_bad" }] });
    const { app, calls } = await regionApp([v1, v2]);
    expect(app.limiter.policyVersions).toHaveLength(2);
    const n = calls.length;
    expect((await check(app, { tenant: "old_bad", resource: "x" })).statusCode).toBe(403);
    expect((await check(app, { tenant: "both", resource: "x" })).json().reason).toBe("allow_list");
    expect(calls.slice(n)).toEqual([]);
    // Allowed in one version only: limited, by the other version's policy (capacity 100).
    const leaving = await check(app, { tenant: "leaving", resource: "x" });
    expect(leaving.json().reason).toBeUndefined();
    expect(leaving.json().global.limit).toBe(100);
    // Limited in both: the smaller capacity applies.
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await check(app, { tenant: "m", resource: "x" })).statusCode);
    expect(statuses).toEqual([200, 200, 429]);
    // Shadow in both versions: shadow.
    for (let i = 0; i < 3; i++) await check(app, { tenant: "m", resource: "sh" });
    expect((await check(app, { tenant: "m", resource: "sh" })).json()).toMatchObject({
      allowed: true,
      wouldDeny: true,
    });
    // Completed: only the new version.
    app.limiter.setPolicies(v2);
    expect((await check(app, { tenant: "old_bad", resource: "x" })).json().reason).toBe("allow_list");
    // The key's tokens do not jump with its capacity (they refill at the new rate).
    const grown = await check(app, { tenant: "m", resource: "x" });
    expect(grown.statusCode).toBe(429);
    expect(grown.json().global.limit).toBe(100);
  });
});

describe("lists with Redis stopped", () => {
  it("allow and deny lists still answer, not degraded; a limited key degrades", async () => {
    const { app } = await regionApp();
    await server.kill();
    try {
      const allow = await check(app, { tenant: "vip", resource: "payments" });
      expect(allow.statusCode).toBe(200);
      expect(allow.json()).toMatchObject({ reason: "allow_list", degraded: false });
      const deny = await check(app, { tenant: "abuser", resource: "payments" });
      expect(deny.statusCode).toBe(403);
      const limited = await check(app, { tenant: "t", resource: "api" });
      expect(limited.statusCode).toBe(429);
      expect(limited.json().degraded).toBe(true);
    } finally {
      await server.restart();
    }
  });
});
