import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { ADMIN_TOKEN, manualClock, REGION_IDS, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { expectHeadersMatchBody } from "./helpers/rate-limit-fields.js";
import { CompoundDecisionSchema, DecisionSchema } from "../src/validation.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function setup(patch: Record<string, unknown> = {}) {
  const store = new FakeStore();
  const clock = manualClock();
  app = await limiterApp({ store, config: testConfig(patch), policies: testPolicies(), clock: clock.now });
  return { app, store, clock };
}

const check = (a: FastifyInstance, payload: unknown) =>
  a.inject({ method: "POST", url: "/v1/check", payload: payload as Record<string, unknown> });

describe("POST /v1/check", () => {
  it("allows with the contract's body and headers", async () => {
    const { app } = await setup();
    const res = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    DecisionSchema.parse(body);
    expect(Object.keys(body).sort()).toEqual(
      [
        "allowed",
        "degraded",
        "global",
        "limit",
        "region",
        "regional",
        "remaining",
        "resetSeconds",
        "retryAfterSeconds",
        "scope",
        "refundReceipt",
      ].sort(),
    );
    // us-east holds 333_333 ppm of C = 1000: a slice of 333.333 tokens, one spent; whole tokens.
    expect(body).toMatchObject({
      allowed: true,
      limit: 333,
      remaining: 332,
      scope: "region",
      regional: { limit: 333, remaining: 332 },
      global: { limit: 1000 },
      region: "us-east",
      degraded: false,
      retryAfterSeconds: 0,
    });
    // The region's policy item: its base slice 333 (333_333 ppm of C = 1000).
    const f = expectHeadersMatchBody(res.headers, body, { baseSlice: 333 });
    // The window of C = 1000 at 1000/min: a drained bucket refills in 60 s (the slice too).
    expect(f.global.params.get("w")).toBe(60);
    expect(f.scoped.params.get("w")).toBe(60);
    // pk: by default an HMAC of the key (16 bytes), never the tenant id itself.
    expect(f.pkHex).toMatch(/^[0-9a-f]{32}$/);
    expect(f.pk).not.toContain("cust_ent_9942");
    expect(res.headers["ratelimit-limit"]).toBe("333");
    expect(res.headers["ratelimit-remaining"]).toBe("332");
    expect(Number(res.headers["ratelimit-reset"])).toBeGreaterThan(0);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.headers["x-ratelimit-degraded"]).toBeUndefined();
  });

  it("denies with 429 and Retry-After; unknown tenants get the default policy", async () => {
    const { app } = await setup();
    // Default: C = 5, this region's slice 1.67 tokens.
    const first = await check(app, { tenant: "nobody_known", resource: "payments_checkout" });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ limit: 1, global: { limit: 5 } });
    const second = await check(app, { tenant: "nobody_known", resource: "payments_checkout" });
    expect(second.statusCode).toBe(429);
    expect(second.json()).toMatchObject({ allowed: false, limit: 1, remaining: 0, degraded: false });
    expect(second.json().retryAfterSeconds).toBeGreaterThan(0);
    expect(Number(second.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(second.headers["ratelimit-remaining"]).toBe("0");
    // On a denial the service limit's t is the Retry-After value.
    expectHeadersMatchBody(second.headers, second.json());
  });

  it("accepts fractional cost and defaults cost to 1; remaining is whole tokens", async () => {
    const { app } = await setup();
    // Slice 3.33333: 2.83 left → 2, then 1.83 → 1.
    const a = await check(app, { tenant: "cust_free_1018", resource: "payments_checkout", cost: 0.5 });
    expect(a.json()).toMatchObject({ limit: 3, remaining: 2 });
    const b = await check(app, { tenant: "cust_free_1018", resource: "payments_checkout" });
    expect(b.json()).toMatchObject({ limit: 3, remaining: 1 });
    expectHeadersMatchBody(b.headers, b.json());
  });

  it.each([
    [{ resource: "r" }, "GQ_ERR_INVALID_BODY", "tenant"],
    [{ tenant: "t" }, "GQ_ERR_INVALID_BODY", "resource"],
    [{ tenant: "t", resource: "r", cost: -1 }, "GQ_ERR_INVALID_BODY", "cost"],
    [{ tenant: "t", resource: "r", cost: "1" }, "GQ_ERR_INVALID_BODY", "cost"],
    [{ tenant: "t", resource: "r", cost: 1e12 }, "GQ_ERR_INVALID_BODY", "cost"],
    [{ tenant: "t", resource: "r", extra: 1 }, "GQ_ERR_INVALID_BODY", "extra"],
    [{ tenant: "", resource: "r" }, "GQ_ERR_INVALID_BODY", "tenant"],
    [{ tenant: 7, resource: "r" }, "GQ_ERR_INVALID_BODY", "tenant"],
    [{ tenant: "x".repeat(129), resource: "r" }, "GQ_ERR_KEY_TOO_LONG", "tenant"],
    [{ tenant: "t", resource: "é".repeat(129) }, "GQ_ERR_KEY_TOO_LONG", "resource"],
    [{ limits: [{ tenant: "t", resource: "r:".repeat(65) }] }, "GQ_ERR_KEY_TOO_LONG", "limits[0].resource"],
    [{ limits: [] }, "GQ_ERR_INVALID_BODY", "limits"],
    [{ limits: [{ tenant: "t", resource: "r", cost: -2 }] }, "GQ_ERR_INVALID_BODY", "limits[0].cost"],
    [
      {
        limits: [
          { tenant: "t", resource: "r" },
          { tenant: "t", resource: "r" },
        ],
      },
      "GQ_ERR_INVALID_BODY",
      "limits[1]",
    ],
  ])("400 for %j names the field", async (payload, code, field) => {
    const { app } = await setup();
    const res = await check(app, payload);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe(code);
    expect(body.field).toBe(field);
    expect(body.message.startsWith(`${field}: `)).toBe(true);
  });

  it("400 on invalid JSON and non-object bodies, 413 on huge bodies, 404 catalogued", async () => {
    const { app } = await setup();
    const bad = await app.inject({
      method: "POST",
      url: "/v1/check",
      headers: { "content-type": "application/json" },
      payload: "{nope",
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: "GQ_ERR_INVALID_BODY", field: "body" });
    const arr = await check(app, [1, 2]);
    expect(arr.json()).toMatchObject({ code: "GQ_ERR_INVALID_BODY", field: "body" });
    const big = await check(app, { tenant: "t", resource: "r", pad: "x".repeat(70_000) });
    expect(big.statusCode).toBe(413);
    expect(big.json().code).toBe("GQ_ERR_PAYLOAD_TOO_LARGE");
    const nf = await app.inject({ method: "GET", url: "/nope" });
    expect(nf.statusCode).toBe(404);
    expect(nf.json().code).toBe("GQ_ERR_NOT_FOUND");
  });

  it("compound limits are all-or-nothing", async () => {
    const { app, store } = await setup();
    const limits = [
      { tenant: "cust_ent_9942", resource: "payments_checkout", cost: 1 },
      { tenant: "cust_free_1018", resource: "payments_checkout", cost: 2 },
    ];
    const ok = await check(app, { limits });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({
      allowed: true,
      failedIndex: -1,
      parts: [{ allowed: true }, { allowed: true }],
    });
    CompoundDecisionSchema.parse(ok.json());
    // Headers follow the binding part (least remaining: the free tier, 3.33 − 2 → 1 of 3).
    expect(ok.json()).toMatchObject({ limit: 3, remaining: 1, global: { limit: 10 } });
    expectHeadersMatchBody(ok.headers, ok.json());
    // Free tier slice 3.33: 1.33 left; the next 2 fail, and the enterprise part is not charged.
    const denied = await check(app, { limits });
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toMatchObject({ allowed: false, failedIndex: 1, limit: 3, global: { limit: 10 } });
    expect(denied.headers["retry-after"]).toBeDefined();
    expectHeadersMatchBody(denied.headers, denied.json());
    const view = await store.inspect({
      tenant: "cust_ent_9942",
      resource: "payments_checkout",
      limit: { algorithm: "token_bucket", capacity: 1000, refillPerSecond: 1000 / 60 },
      baseShare: 333_333,
      floorShare: 20_000,
    });
    expect(view.counters.admitted["us-east.1"]).toBe(1);
  });
});

describe("refund, quotas, health, metrics", () => {
  it("refund returns cost to the bucket, given the check's receipt", async () => {
    const { app } = await setup();
    const key = { tenant: "cust_free_1018", resource: "payments_checkout" };
    const c = await check(app, { ...key, cost: 3 });
    const receipt = c.json().refundReceipt;
    expect(receipt).toMatch(/^gq1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    const r = await app.inject({ method: "POST", url: "/v1/refund", payload: { ...key, receipt, cost: 2 } });
    expect(r.statusCode).toBe(200);
    expect(r.json().refunded).toBe(2);
    // 3.33 − 3 + 2 = 2.33 → 2 whole tokens.
    expect(r.json().remaining).toBe(2);
    // Denials carry no receipt; nor does a refund without one go through.
    for (let i = 0; i < 3; i++) await check(app, key);
    const denied = await check(app, key);
    expect(denied.statusCode).toBe(429);
    expect(denied.json().refundReceipt).toBeUndefined();
    const none = await app.inject({ method: "POST", url: "/v1/refund", payload: { ...key, cost: 1 } });
    expect(none.statusCode).toBe(400);
    expect(none.json()).toMatchObject({ code: "GQ_ERR_INVALID_BODY", field: "receipt" });
  });

  it("a compound check's parts each carry a receipt when allowed", async () => {
    const { app } = await setup();
    const limits = [
      { tenant: "cust_ent_9942", resource: "payments_checkout", cost: 2 },
      { tenant: "cust_free_1018", resource: "payments_checkout" },
    ];
    const r = await app.inject({ method: "POST", url: "/v1/check", payload: { limits } });
    expect(r.statusCode).toBe(200);
    const parts = r.json().parts as { refundReceipt: string }[];
    // The receipts are the parts' (one per charged limit): the check's own body has none.
    expect(r.json().refundReceipt).toBeUndefined();
    expect(parts.every((p) => typeof p.refundReceipt === "string")).toBe(true);
    const back = await app.inject({
      method: "POST",
      url: "/v1/refund",
      payload: { ...limits[0], cost: undefined, receipt: parts[0]!.refundReceipt },
    });
    expect(back.json()).toMatchObject({ refunded: 2 });
    const wrong = await app.inject({
      method: "POST",
      url: "/v1/refund",
      payload: { tenant: "cust_ent_9942", resource: "payments_checkout", receipt: parts[1]!.refundReceipt },
    });
    expect(wrong.json()).toMatchObject({ code: "GQ_ERR_RECEIPT_WRONG_KEY", statusCode: 403 });
  });

  it("GET /v1/quotas shows policy, shares of every region, counters, loans", async () => {
    const { app } = await setup();
    await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    const res = await app.inject({ method: "GET", url: "/v1/quotas/cust_ent_9942/payments_checkout" });
    expect(res.statusCode).toBe(200);
    const q = res.json();
    expect(q.policy).toMatchObject({
      algorithm: "token_bucket",
      capacity: 1000,
      baseShare: 333_333,
      floorShare: 20_000,
    });
    expect(q.regions.map((r: { id: string }) => r.id)).toEqual(REGION_IDS);
    expect(q.regions.reduce((a: number, r: { baseShare: number }) => a + r.baseShare, 0)).toBe(1_000_000);
    expect(q.share).toBe(333_333);
    expect(q.knownShares).toEqual({ "us-east": 333_333, "eu-west": 333_333, "ap-south": 333_334 });
    expect(q.counters.admitted).toEqual({ "us-east.1": 1 });
    expect(q.loans).toEqual({ out: [], in: [] });
    const bad = await app.inject({ method: "GET", url: `/v1/quotas/${"x".repeat(129)}/payments_checkout` });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: "GQ_ERR_KEY_TOO_LONG", field: "tenant" });
  });

  it("healthz always, readyz only when the store answers", async () => {
    const { app, store } = await setup();
    expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    expect((await app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    store.failWith = new Error("down");
    const r = await app.inject({ method: "GET", url: "/readyz" });
    expect(r.statusCode).toBe(503);
    expect(r.json().code).toBe("GQ_ERR_STORE_UNAVAILABLE");
  });

  it("/metrics exposes decisions, latency, store errors, breaker state, shares", async () => {
    const { app, store } = await setup();
    await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    await check(app, { tenant: "someone", resource: "payments_checkout" });
    store.failWith = new Error("down");
    await check(app, { tenant: "someone", resource: "payments_checkout" });
    const text = (await app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toContain('geoquota_decisions_total{result="allowed",source="store"} 2');
    expect(text).toContain('geoquota_decisions_total{result="denied",source="unavailable"} 1');
    expect(text).toContain("geoquota_check_duration_seconds_bucket");
    expect(text).toContain('geoquota_redis_errors_total{op="check",kind="error"} 1');
    expect(text).toContain("geoquota_breaker_state 0");
    expect(text).toContain(
      'geoquota_share_ratio{key_class="cust_ent_9942",resource="payments_checkout"} 0.333333',
    );
    expect(text).toContain('geoquota_share_ratio{key_class="default",resource="payments_checkout"} 0.333333');
  });
});

describe("policy admin", () => {
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };

  it("401 without or with a wrong token", async () => {
    const { app } = await setup();
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: ADMIN_TOKEN }]) {
      const g = await app.inject({ method: "GET", url: "/v1/policies", headers });
      expect(g.statusCode).toBe(401);
      expect(g.json().code).toBe("GQ_ERR_UNAUTHORIZED");
      const p = await app.inject({
        method: "PUT",
        url: "/v1/policies/t/r",
        headers,
        payload: { capacity: 1, refillPerSecond: 1 },
      });
      expect(p.statusCode).toBe(401);
    }
  });

  // One region: nobody else sizes the key's slice, so the change applies here at
  // once. (With several regions and no policy replication it is refused: issue 21.)
  const ONE_REGION = { regions: [{ id: "us-east", gossip: "127.0.0.1:7301" }] };
  it("lists policies and a PUT takes effect for subsequent checks", async () => {
    const { app } = await setup(ONE_REGION);
    const list = await app.inject({ method: "GET", url: "/v1/policies", headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json().policies).toContainEqual(
      expect.objectContaining({ tenant: "cust_ent_9942", capacity: 1000 }),
    );
    const put = await app.inject({
      method: "PUT",
      url: "/v1/policies/new_tenant/payments_checkout",
      headers: auth,
      payload: { capacity: 300, refill: { tokens: 300, perSeconds: 60 } },
    });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({
      tenant: "new_tenant",
      capacity: 300,
      refillPerSecond: 5,
      algorithm: "token_bucket",
    });
    const res = await check(app, { tenant: "new_tenant", resource: "payments_checkout" });
    expect(res.json().global.limit).toBe(300);
  });

  it("PUT /v1/policy without If-Match: 428 naming the header (problem details too); stale 412; `*` and the ETag pass", async () => {
    const { app } = await setup(ONE_REGION);
    const read = await app.inject({ method: "GET", url: "/v1/policy", headers: auth });
    const etag = read.headers.etag as string;
    expect(etag).toMatch(/^"v0@us-east#[0-9a-f]{32}"$/);
    const doc = read.json().policies as { default: Record<string, unknown> };
    const put = (headers: Record<string, string>, capacity: number) =>
      app.inject({
        method: "PUT",
        url: "/v1/policy",
        headers: { ...auth, ...headers },
        payload: { ...doc, default: { ...doc.default, capacity } },
      });
    for (const h of [{}, { "if-match": "" }]) {
      const none = await put(h, 6);
      expect(none.statusCode).toBe(428);
      expect(none.json()).toMatchObject({
        code: "GQ_ERR_POLICY_PRECONDITION_REQUIRED",
        error: "Precondition Required",
        field: "If-Match",
      });
      expect(none.json().message).toContain("If-Match");
    }
    const problem = await put({ accept: "application/problem+json" }, 6);
    expect(problem.statusCode).toBe(428);
    expect(problem.headers["content-type"]).toContain("application/problem+json");
    expect(problem.json()).toMatchObject({ status: 428, title: "Precondition Required", field: "If-Match" });
    // Nothing was applied by the refused PUTs.
    expect((await app.inject({ method: "GET", url: "/v1/policy", headers: auth })).headers.etag).toBe(etag);
    const based = await put({ "if-match": etag }, 6);
    expect(based.statusCode).toBe(200);
    const stale = await put({ "if-match": etag }, 7);
    expect(stale.statusCode).toBe(412);
    expect(stale.json()).toMatchObject({ code: "GQ_ERR_POLICY_STALE", field: "If-Match" });
    // `*`: the explicit "whatever is newest" (RFC 9110 If-Match).
    const any = await put({ "if-match": "*" }, 7);
    expect(any.statusCode).toBe(200);
    expect(any.json().state.policies.default.capacity).toBe(7);
  });

  it("400 naming the field for an invalid policy; with several static regions, nothing that sizes a slice", async () => {
    const { app } = await setup();
    const bad = await app.inject({
      method: "PUT",
      url: "/v1/policies/t/r",
      headers: auth,
      payload: { capacity: -5, refillPerSecond: 1 },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: "GQ_ERR_INVALID_POLICY", field: "capacity" });
    const w = await app.inject({
      method: "PUT",
      url: "/v1/policies/t/r",
      headers: auth,
      payload: { capacity: 5, refillPerSecond: 1, weights: { "us-east": 1 } },
    });
    expect(w.statusCode).toBe(400);
    expect(w.json().field).toMatch(/^policies\.t\/r\./);
    const c = await app.inject({
      method: "PUT",
      url: "/v1/policies/cust_ent_9942/payments_checkout",
      headers: auth,
      payload: { algorithm: "gcra", capacity: 1000, refillPerSecond: 10 },
    });
    expect(c.statusCode).toBe(400);
    expect(c.json()).toMatchObject({
      code: "GQ_ERR_INVALID_POLICY",
      field: "policies.cust_ent_9942/payments_checkout.algorithm",
    });
  });
});

describe("degraded modes", () => {
  it("fail-closed: store down → 429 degraded after the breaker opens, no store calls while open", async () => {
    const { app, store } = await setup();
    store.failWith = new Error("ECONNREFUSED");
    for (let i = 0; i < 5; i++) {
      const r = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
      expect(r.statusCode).toBe(429);
      expect(r.json().degraded).toBe(true);
      expect(r.headers["x-ratelimit-degraded"]).toBe("true");
      // No store answer: the decision is this process's (it holds no leases: 0 of 0).
      expect(r.json()).toMatchObject({
        scope: "process",
        limit: 0,
        remaining: 0,
        process: { limit: 0, remaining: 0 },
      });
      expectHeadersMatchBody(r.headers, r.json());
    }
    const calls = store.calls.length;
    const r = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(r.statusCode).toBe(429);
    expect(store.calls.length).toBe(calls);
    expect(app.limiter.breaker.state).toBe("open");
    expect(Number(r.headers["retry-after"])).toBe(1);
  });

  it("timeouts count as failures (store hangs past redis.timeoutMs)", async () => {
    const { app, store } = await setup({ redis: { url: "redis://x:1", timeoutMs: 5 } });
    store.hang = true;
    const r = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(r.statusCode).toBe(429);
    expect(r.json().degraded).toBe(true);
    const m = (await app.inject({ method: "GET", url: "/metrics" })).body;
    expect(m).toContain('geoquota_redis_errors_total{op="check",kind="timeout"} 1');
  });

  it("fail-open is bounded: a local bucket at the base slice rate, starting empty, bound reported", async () => {
    const { app, store, clock } = await setup({ failMode: "open" });
    store.failWith = new Error("down");
    const first = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(first.statusCode).toBe(429);
    expect(first.json().failOpenBound).toEqual({
      refillPerSecond: ((1000 / 60) * 333_333) / 1e6,
      capacity: (1000 * 333_333) / 1e6,
      scope: "per_process",
    });
    clock.advance(600); // 0.6 s × 5.55/s = 3.33 tokens
    const admitted = [];
    for (let i = 0; i < 5; i++)
      admitted.push(
        (await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" })).statusCode,
      );
    expect(admitted).toEqual([200, 200, 200, 429, 429]);
    // Process scope: its fail-open bucket, capacity C·b/U = 333.333 → 333, with the slice's window.
    const last = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(last.json()).toMatchObject({ scope: "process", limit: 333, remaining: 0 });
    expect(expectHeadersMatchBody(last.headers, last.json()).scoped.params.get("w")).toBe(60);
  });

  it("fail-open after a blip the breaker ignored starts empty again at the next outage (no burst)", async () => {
    const { app, store, clock } = await setup({ failMode: "open" });
    const key = { tenant: "cust_ent_9942", resource: "payments_checkout" };
    // One failure, below the breaker's threshold: a fail-open bucket starts (empty), the breaker stays closed.
    store.failWith = new Error("blip");
    expect((await check(app, key)).statusCode).toBe(429);
    expect(app.limiter.breaker.state).toBe("closed");
    store.failWith = undefined;
    expect((await check(app, key)).statusCode).toBe(200);
    // Long enough for that bucket to refill to its whole capacity (333 tokens at 5.55/s).
    clock.advance(120_000);
    store.failWith = new Error("down");
    const first = await check(app, key);
    expect(first.statusCode).toBe(429);
    expect(first.json()).toMatchObject({ scope: "process", remaining: 0, degraded: true });
  });

  it("refund while the store is down is a 503 from the catalog", async () => {
    const { app, store } = await setup();
    const receipt = (await check(app, { tenant: "t", resource: "r" })).json().refundReceipt;
    store.failWith = new Error("down");
    const r = await app.inject({
      method: "POST",
      url: "/v1/refund",
      payload: { tenant: "t", resource: "r", receipt },
    });
    expect(r.statusCode).toBe(503);
    expect(r.json().code).toBe("GQ_ERR_STORE_UNAVAILABLE");
  });
});

describe("the service keeps only the product's routes", () => {
  it("the seed's checkout route moved to the demo", async () => {
    const { app } = await setup();
    const r = await app.inject({ method: "POST", url: "/v1/payments/checkout", payload: {} });
    expect(r.statusCode).toBe(404);
  });
});
