// Issue 22, headers and errors, through app.inject: the `pk` option (hash by
// default, raw, omit), the `region` policy item stable at the base slice while
// the share moves, legacy resets consistent with Retry-After, RFC 9457 problem
// details on request (the draft's quota-exceeded type), 415 and 405.
import { parseRegionConfig } from "@geoquota/config";
import type { FastifyInstance } from "fastify";
import { parseList } from "structured-headers";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { rateLimitHeaders } from "../src/headers.js";
import type { Decision, KeyPolicy } from "@geoquota/core";
import { QUOTA_EXCEEDED_TYPE, prefersProblem } from "../src/problem.js";
import { testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { expectHeadersMatchBody, parseRateLimitFields } from "./helpers/rate-limit-fields.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
});

async function setup(patch: Record<string, unknown> = {}, store = new FakeStore()) {
  const app = await limiterApp({ store, config: testConfig(patch), policies: testPolicies() });
  apps.push(app);
  return app;
}

const check = (app: FastifyInstance, payload: object, headers: Record<string, string> = {}) =>
  app.inject({ method: "POST", url: "/v1/check", payload: payload as Record<string, unknown>, headers });

const pkParams = (h: Record<string, unknown>) => {
  const f = parseRateLimitFields(h as Record<string, string>);
  return [...f.policies, ...f.limits].map((i) => i.params.get("pk"));
};

describe("the pk parameter", () => {
  const key = { tenant: "cust_ent_9942", resource: "payments_checkout" };

  it("is an HMAC of the key by default: 16 bytes, no tenant id, the same in every region", async () => {
    const east = await check(await setup(), key);
    const west = await check(await setup({ region: "eu-west" }), key);
    const pks = pkParams(east.headers).map((p) => Buffer.from(p as ArrayBuffer).toString("hex"));
    expect(new Set(pks).size).toBe(1);
    expect(pks[0]).toMatch(/^[0-9a-f]{32}$/);
    for (const field of ["ratelimit", "ratelimit-policy"])
      expect(String(east.headers[field])).not.toContain(Buffer.from("cust_ent_9942").toString("base64"));
    expect(pkParams(west.headers).map((p) => Buffer.from(p as ArrayBuffer).toString("hex"))).toEqual(pks);
    // Another key, another pk.
    const other = await check(await setup(), { ...key, tenant: "cust_free_1018" });
    expect(Buffer.from(pkParams(other.headers)[0] as ArrayBuffer).toString("hex")).not.toBe(pks[0]);
  });

  it('"raw" is the stored key; "omit" drops the parameter from every item', async () => {
    const raw = await check(await setup({ partitionKey: "raw" }), key);
    expect(pkParams(raw.headers).map((p) => Buffer.from(p as ArrayBuffer).toString())).toEqual([
      "cust_ent_9942|payments_checkout",
      "cust_ent_9942|payments_checkout",
      "cust_ent_9942|payments_checkout",
    ]);
    const omitted = await check(await setup({ partitionKey: "omit" }), key);
    expect(pkParams(omitted.headers)).toEqual([undefined, undefined, undefined]);
    expectHeadersMatchBody(omitted.headers, omitted.json());
  });

  it("a config with another value is refused, naming the field", () => {
    expect(() => testConfig({ partitionKey: "plain" })).toThrow(/partitionKey/);
    expect(parseRegionConfig).toBeTypeOf("function");
  });
});

/** A store whose region holds twice its base share (a loan in): the current slice moves. */
class BorrowingStore extends FakeStore {
  override async check(policy: KeyPolicy, cost: number): Promise<Decision> {
    const d = await super.check(policy, cost);
    return { ...d, share: d.share * 2 };
  }
}

describe("RateLimit-Policy stays the policy; RateLimit moves", () => {
  it("the region item's quota is the base slice while the current slice is twice it", async () => {
    const app = await setup({}, new BorrowingStore());
    const res = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    // Current slice: 2 × 333.333 = 666 whole tokens, in the body and the legacy limit.
    expect(body.limit).toBe(666);
    expect(res.headers["ratelimit-limit"]).toBe("666");
    const f = expectHeadersMatchBody(res.headers, body, { baseSlice: 333 });
    expect(f.scoped.params.get("q")).toBe(333);
    expect(f.service.params.get("r")).toBe(body.remaining);
  });
});

describe("legacy resets agree with Retry-After", () => {
  it("a denial whose bucket reset is 0 still says the retry time everywhere", () => {
    const h = rateLimitHeaders({
      allowed: false,
      limit: 10,
      remaining: 0,
      scope: "region",
      scopeLimit: 5,
      resetSeconds: 0,
      retryAfterSeconds: 60,
      degraded: false,
      source: "store",
      policy: {
        tenant: "t",
        resource: "r",
        limit: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 1 },
        baseShare: 500_000,
        floorShare: 20_000,
      },
    });
    expect(h["retry-after"]).toBe("60");
    expect(h["ratelimit-reset"]).toBe("60");
    expect(h["x-ratelimit-reset"]).toBe("60");
    const [service] = parseList(h.ratelimit!) as [[string, Map<string, unknown>]];
    expect(service[1].get("t")).toBe(60);
  });

  it("on a real 429 through the app", async () => {
    const app = await setup();
    const key = { tenant: "nobody_known", resource: "payments_checkout" };
    await check(app, key);
    const denied = await check(app, key);
    expect(denied.statusCode).toBe(429);
    expect(denied.headers["ratelimit-reset"]).toBe(denied.headers["retry-after"]);
    expect(denied.headers["x-ratelimit-reset"]).toBe(denied.headers["retry-after"]);
    expectHeadersMatchBody(denied.headers, denied.json());
  });
});

describe("problem details (RFC 9457) when asked for", () => {
  const key = { tenant: "nobody_known", resource: "payments_checkout" };
  const problem = { accept: "application/problem+json" };

  it("a 429 is the draft's quota-exceeded problem, with the decision's fields and headers", async () => {
    const app = await setup();
    await check(app, key);
    const denied = await check(app, key, problem);
    expect(denied.statusCode).toBe(429);
    expect(denied.headers["content-type"]).toMatch(/^application\/problem\+json/);
    const body = denied.json();
    expect(body).toMatchObject({
      type: QUOTA_EXCEEDED_TYPE,
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      "violated-policies": ["region"],
      code: "GQ_ERR_RATE_LIMITED",
      allowed: false,
      scope: "region",
    });
    expect(typeof body.detail).toBe("string");
    expectHeadersMatchBody(denied.headers, body);
  });

  it("without asking (no Accept, */*, or JSON preferred) the body stays the decision JSON", async () => {
    for (const accept of [
      undefined,
      "*/*",
      "application/json",
      "application/json, application/problem+json;q=0.5",
    ]) {
      const app = await setup();
      await check(app, key);
      const denied = await check(app, key, accept === undefined ? {} : { accept });
      expect(denied.statusCode).toBe(429);
      expect(denied.headers["content-type"]).toMatch(/^application\/json/);
      expect(denied.json().type).toBeUndefined();
      expect(denied.json()).toMatchObject({ allowed: false, scope: "region" });
    }
  });

  it("an invalid body is an about:blank problem with the catalog code and the field", async () => {
    const app = await setup();
    const bad = await check(app, { tenant: "t", resource: "r", cost: -1 }, problem);
    expect(bad.statusCode).toBe(400);
    expect(bad.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(bad.json()).toMatchObject({
      type: "about:blank",
      title: "Bad Request",
      status: 400,
      code: "GQ_ERR_INVALID_BODY",
      field: "cost",
    });
    // The default stays Fastify's shape.
    const plain = await check(app, { tenant: "t", resource: "r", cost: -1 });
    expect(plain.json()).toMatchObject({ statusCode: 400, code: "GQ_ERR_INVALID_BODY", field: "cost" });
  });

  it("Accept parsing: q=0 refuses, the higher q wins", () => {
    expect(prefersProblem("application/problem+json")).toBe(true);
    expect(prefersProblem("application/problem+json;q=0")).toBe(false);
    expect(prefersProblem("application/json;q=0.4, application/problem+json;q=0.9")).toBe(true);
    expect(prefersProblem("application/json, application/problem+json;q=0.9")).toBe(false);
    expect(prefersProblem(["text/html", "application/problem+json"])).toBe(true);
    expect(prefersProblem("*/*")).toBe(false);
  });
});

describe("415 and 405", () => {
  it("a body of another content type is 415 GQ_ERR_UNSUPPORTED_MEDIA_TYPE", async () => {
    const app = await setup();
    const res = await app.inject({
      method: "POST",
      url: "/v1/check",
      headers: { "content-type": "text/plain" },
      payload: "tenant=t",
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: "GQ_ERR_UNSUPPORTED_MEDIA_TYPE", field: "body" });
  });

  it("a known path with another method is 405 with Allow; an unknown path stays 404", async () => {
    const app = await setup();
    const get = await app.inject({ method: "GET", url: "/v1/check" });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe("POST");
    expect(get.json()).toMatchObject({ code: "GQ_ERR_METHOD_NOT_ALLOWED" });
    const del = await app.inject({ method: "DELETE", url: "/v1/quotas/acme/api?x=1" });
    expect(del.statusCode).toBe(405);
    expect(del.headers.allow).toBe("GET, HEAD");
    const problem = await app.inject({
      method: "PUT",
      url: "/metrics",
      headers: { accept: "application/problem+json" },
    });
    expect(problem.statusCode).toBe(405);
    expect(problem.json()).toMatchObject({ type: "about:blank", title: "Method Not Allowed", status: 405 });
    const none = await app.inject({ method: "GET", url: "/v1/nothing-here" });
    expect(none.statusCode).toBe(404);
    expect(none.json()).toMatchObject({ code: "GQ_ERR_NOT_FOUND" });
  });
});
