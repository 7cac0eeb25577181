import { parsePolicies } from "@geoquota/config";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { Limiter } from "../src/limiter.js";
import { geoquotaRateLimit } from "../src/plugin.js";
import { RateLimitedSchema } from "../src/validation.js";
import { REGION_IDS, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { expectHeadersMatchBody, parseRateLimitFields } from "./helpers/rate-limit-fields.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function userApp(options: Partial<Parameters<typeof geoquotaRateLimit>[1]> = {}, patch = {}) {
  const store = new FakeStore();
  const limiter = new Limiter({ store, config: testConfig(patch), policies: testPolicies() });
  app = Fastify({ logger: false, trustProxy: true });
  await app.register(geoquotaRateLimit, { limiter, ...options });
  app.get("/free", { config: { geoquota: false } }, async () => ({ ok: true }));
  app.get("/by-ip", { config: { geoquota: { resource: "search" } } }, async () => ({ ok: true }));
  app.post(
    "/expensive",
    { config: { geoquota: { resource: "payments_checkout", cost: 2, key: { header: "x-tenant-id" } } } },
    async () => ({ ok: true }),
  );
  app.get(
    "/custom",
    {
      config: {
        geoquota: { resource: "api", key: (req) => String(req.query && (req.query as { u?: string }).u) },
      },
    },
    async () => ({ ok: true }),
  );
  app.get("/global", async () => ({ ok: true }));
  return { app, store };
}

describe("Fastify plugin on users' routes", () => {
  it("keys by aggregated client IP: one /24 shares a bucket", async () => {
    const { app } = await userApp();
    // Default policy: C = 5, this region's slice 1.67 tokens.
    const hit = (ip: string) =>
      app.inject({ method: "GET", url: "/by-ip", headers: { "x-forwarded-for": ip } });
    expect((await hit("198.51.100.1")).statusCode).toBe(200);
    const denied = await hit("198.51.100.200");
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toMatchObject({
      code: "GQ_ERR_RATE_LIMITED",
      allowed: false,
      limit: 1,
      remaining: 0,
      scope: "region",
      global: { limit: 5 },
      region: "us-east",
    });
    RateLimitedSchema.parse(denied.json());
    expect(denied.headers["retry-after"]).toBeDefined();
    expect(denied.headers["ratelimit-limit"]).toBe("1");
    expectHeadersMatchBody(denied.headers, denied.json());
    expect((await hit("198.51.101.1")).statusCode).toBe(200);
  });

  it("per-route cost and tenant header; opt-out routes are untouched", async () => {
    const { app } = await userApp();
    const post = () =>
      app.inject({ method: "POST", url: "/expensive", headers: { "x-tenant-id": "cust_free_1018" } });
    // Slice 3.33 tokens, cost 2 each.
    expect((await post()).statusCode).toBe(200);
    const second = await post();
    expect(second.statusCode).toBe(429);
    expect(second.headers["x-ratelimit-remaining"]).toBe("1");
    const free = await app.inject({ method: "GET", url: "/free" });
    expect(free.statusCode).toBe(200);
    expect(free.headers["ratelimit-limit"]).toBeUndefined();
  });

  it("custom key function; any characters are hashed, over-long keys are a 400 naming the field", async () => {
    // partitionKey "raw": the headers' pk shows the stored key.
    const { app } = await userApp({ partitionKey: "raw" });
    expect((await app.inject({ method: "GET", url: "/custom?u=alice" })).statusCode).toBe(200);
    const odd = await app.inject({ method: "GET", url: "/custom?u=a:b" });
    expect(odd.statusCode).toBe(200);
    // The partition key is the stored key: the HMAC, never the raw `a:b`.
    const pk = parseRateLimitFields(odd.headers).limits[0]?.params.get("pk") as ArrayBuffer;
    expect(Buffer.from(pk).toString()).toMatch(/^h-[0-9a-f]{16}\|api$/);
    const long = await app.inject({ method: "GET", url: `/custom?u=${"x".repeat(129)}` });
    expect(long.statusCode).toBe(400);
    expect(long.json()).toMatchObject({ code: "GQ_ERR_KEY_TOO_LONG" });
    expect(long.json().message).toBe("tenant: longer than 128 characters");
  });

  it("global options apply to routes without their own config; keys are hashed when configured", async () => {
    const { app, store } = await userApp(
      { global: { resource: "everything" } },
      { keyHashSecret: "hash-secret-0123456789" },
    );
    const r = await app.inject({
      method: "GET",
      url: "/global",
      headers: { "x-forwarded-for": "192.0.2.9" },
    });
    expect(r.statusCode).toBe(200);
    expect(r.headers["ratelimit-limit"]).toBe("1");
    // The store never sees the raw subnet, only its HMAC.
    const sent = store.calls.length;
    expect(sent).toBe(1);
    const view = await store.inspect({
      tenant: "ip4-192.0.2.0-24",
      resource: "everything",
      limit: { algorithm: "token_bucket", capacity: 5, refillPerSecond: 1 },
      baseShare: 333_333,
      floorShare: 0,
    });
    expect(view.counters.admitted["us-east.1"]).toBe(0);
  });
});

describe("plugin and the policies' lists", () => {
  it("a deny-listed key gets 403 GQ_ERR_DENY_LISTED (no RateLimit headers); an allow-listed one passes; no store call", async () => {
    const store = new FakeStore();
    const policies = parsePolicies(
      {
        default: { capacity: 1, refillPerSecond: 0.001 },
        allow: [{ tenant: "vip" }],
        deny: [{ key: "bad*/api" }],
      },
      "test-policies.json",
      REGION_IDS,
    );
    const limiter = new Limiter({ store, config: testConfig(), policies });
    app = Fastify({ logger: false });
    await app.register(geoquotaRateLimit, { limiter, key: { header: "x-tenant-id" } });
    app.get("/api", { config: { geoquota: { resource: "api" } } }, async () => ({ ok: true }));
    const hit = (tenant: string) =>
      app!.inject({ method: "GET", url: "/api", headers: { "x-tenant-id": tenant } });
    const denied = await hit("bad_actor");
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toMatchObject({ code: "GQ_ERR_DENY_LISTED", allowed: false, reason: "deny_list" });
    RateLimitedSchema.parse(denied.json());
    expect(denied.headers.ratelimit).toBeUndefined();
    expect(denied.headers["retry-after"]).toBeUndefined();
    for (let i = 0; i < 5; i++) expect((await hit("vip")).statusCode).toBe(200);
    expect(store.calls).toEqual([]);
  });
});

describe("plugin options (issue 22)", () => {
  /** One route on a default-policy key (slice 1.67 tokens): the second request is denied. */
  async function optionApp(options: Partial<Parameters<typeof geoquotaRateLimit>[1]>) {
    const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
    app = Fastify({ logger: false });
    const ran: string[] = [];
    await app.register(geoquotaRateLimit, { limiter, key: { header: "x-tenant-id" }, ...options });
    app.post(
      "/orders",
      {
        config: { geoquota: { resource: "orders" } },
        preHandler: async () => {
          ran.push("route preHandler");
        },
      },
      async () => ({ ok: true }),
    );
    // @fastify/rate-limit's option name is not ours: such a route is not limited by geoquota.
    app.get("/theirs", { config: { rateLimit: { max: 1 } } as never }, async () => ({ ok: true }));
    return { app, ran };
  }
  const post = (a: FastifyInstance, payload = "{}", headers: Record<string, string> = {}) =>
    a.inject({
      method: "POST",
      url: "/orders",
      payload,
      headers: { "content-type": "application/json", "x-tenant-id": "t1", ...headers },
    });

  it("is a fastify-plugin (not encapsulated, named) and refuses an unknown hook", async () => {
    const meta = geoquotaRateLimit as unknown as Record<symbol, unknown>;
    expect(meta[Symbol.for("skip-override")]).toBe(true);
    expect(meta[Symbol.for("fastify.display-name")]).toBe("@geoquota/limiter");
    const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
    app = Fastify({ logger: false });
    await expect(
      app.register(geoquotaRateLimit, { limiter, hook: "onSend" as never }).ready(),
    ).rejects.toThrow(/hook must be one of onRequest, preValidation, preHandler/);
  });

  it('hook "onRequest" denies before the body is parsed; the default preHandler parses first', async () => {
    const early = await optionApp({ hook: "onRequest" });
    expect((await post(early.app)).statusCode).toBe(200);
    // Denied with a body that does not parse: 429, not 400 — the check ran first.
    const denied = await post(early.app, "{not json");
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toMatchObject({ code: "GQ_ERR_RATE_LIMITED" });
    expect(early.ran).toEqual(["route preHandler"]);
    await app?.close();
    const late = await optionApp({});
    await post(late.app);
    expect((await post(late.app, "{not json")).statusCode).toBe(400);
  });

  it("onExceeded is told each denial; errorResponseBuilder makes the body, the headers stay", async () => {
    const seen: { key: string; resource: string; cost: number; statusCode: number }[] = [];
    const { app } = await optionApp({
      onExceeded: (_req, c) =>
        seen.push({ key: c.key, resource: c.resource, cost: c.cost, statusCode: c.statusCode }),
      errorResponseBuilder: (_req, c) => ({
        slowDown: true,
        retryInSeconds: Math.ceil(c.result.retryAfterSeconds),
      }),
    });
    expect((await post(app)).statusCode).toBe(200);
    expect(seen).toEqual([]);
    const denied = await post(app);
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toEqual({ slowDown: true, retryInSeconds: Number(denied.headers["retry-after"]) });
    expect(denied.headers["ratelimit-policy"]).toBeDefined();
    expect(seen).toEqual([{ key: "t1", resource: "orders", cost: 1, statusCode: 429 }]);
    // Not our option name: never limited by geoquota.
    for (let i = 0; i < 3; i++)
      expect((await app.inject({ method: "GET", url: "/theirs" })).statusCode).toBe(200);
  });

  it("problem details when the client asks for them", async () => {
    const { app } = await optionApp({});
    await post(app);
    const denied = await post(app, "{}", { accept: "application/problem+json" });
    expect(denied.statusCode).toBe(429);
    expect(denied.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(denied.json()).toMatchObject({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      status: 429,
      "violated-policies": ["region"],
      code: "GQ_ERR_RATE_LIMITED",
    });
  });

  it("skipOnError lets a request through when the check throws; without it the error is the route's", async () => {
    const throwing = (skipOnError: boolean) => {
      const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
      const a = Fastify({ logger: false });
      a.register(geoquotaRateLimit, {
        limiter,
        skipOnError,
        key: () => {
          throw new Error("no tenant on this request");
        },
      });
      a.register(async (s) => {
        s.get("/x", { config: { geoquota: { resource: "api" } } }, async () => ({ ok: true }));
      });
      return a;
    };
    const strict = throwing(false);
    expect((await strict.inject({ method: "GET", url: "/x" })).statusCode).toBe(500);
    await strict.close();
    const lenient = throwing(true);
    expect((await lenient.inject({ method: "GET", url: "/x" })).statusCode).toBe(200);
    await lenient.close();
  });
});
