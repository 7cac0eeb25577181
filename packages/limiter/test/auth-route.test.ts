// GET /v1/auth (nginx auth_request): the decision is the status — 204 admitted,
// 403 denied, 401 for any input error (never a status nginx maps to its fail
// mode) — and it is POST /v1/check's decision: the same bucket, policies,
// degraded modes and metrics.
import { parsePolicies } from "@geoquota/config";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { ErrorSchema } from "../src/validation.js";
import { manualClock, REGION_IDS, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { parseRateLimitFields } from "./helpers/rate-limit-fields.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function setup(patch: Record<string, unknown> = {}, policies = testPolicies()) {
  const store = new FakeStore();
  const clock = manualClock();
  app = await limiterApp({ store, config: testConfig(patch), policies, clock: clock.now });
  return { app, store, clock };
}

const auth = (a: FastifyInstance, query = "", headers: Record<string, string> = {}) =>
  a.inject({ method: "GET", url: `/v1/auth${query}`, headers });

async function metric(a: FastifyInstance, series: string): Promise<number> {
  const text = (await a.inject({ method: "GET", url: "/metrics" })).body;
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe("GET /v1/auth", () => {
  it("admits with 204 and the RateLimit fields, then denies with 403, Retry-After and the fields", async () => {
    const { app } = await setup();
    // The default policy: C = 5, this region's slice 1.67 tokens: one admission.
    const ok = await auth(app, "?tenant=nobody_known&resource=payments_checkout");
    expect(ok.statusCode).toBe(204);
    expect(ok.body).toBe("");
    expect(ok.headers["x-geoquota-decision"]).toBe("allowed");
    expect(ok.headers["retry-after"]).toBeUndefined();
    const f = parseRateLimitFields(ok.headers);
    expect(f.limits[0]!.params.get("r")).toBe(0);
    expect(f.policies[0]!.params.get("q")).toBe(5);
    const denied = await auth(app, "?tenant=nobody_known&resource=payments_checkout");
    expect(denied.statusCode).toBe(403);
    expect(denied.headers["x-geoquota-decision"]).toBe("rate_limited");
    const retryAfter = Number(denied.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    // On a denial the service limit's t is the Retry-After value, as on /v1/check's 429.
    expect(parseRateLimitFields(denied.headers).limits[0]!.params.get("t")).toBe(retryAfter);
    expect(denied.json()).toMatchObject({ allowed: false, remaining: 0, degraded: false });
  });

  it("shares the bucket with POST /v1/check: exactly the slice's whole tokens are admitted", async () => {
    const { app } = await setup();
    // cust_free_1018: slice 3.33 tokens. Headers and query alternate; /v1/check takes its turn.
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++)
      statuses.push(
        (
          await auth(app, "", {
            "x-geoquota-tenant": "cust_free_1018",
            "x-geoquota-resource": "payments_checkout",
          })
        ).statusCode,
      );
    const c = await app.inject({
      method: "POST",
      url: "/v1/check",
      payload: { tenant: "cust_free_1018", resource: "payments_checkout" },
    });
    expect(c.statusCode).toBe(200);
    statuses.push((await auth(app, "?tenant=cust_free_1018&resource=payments_checkout")).statusCode);
    expect(statuses).toEqual([204, 204, 403]);
    expect(await metric(app, 'geoquota_decisions_total{result="allowed",source="store"}')).toBe(3);
    expect(await metric(app, 'geoquota_decisions_total{result="denied",source="store"}')).toBe(1);
  });

  it("takes cost from the query or X-Geoquota-Cost; cost 0 checks without counting", async () => {
    const { app } = await setup();
    const key = "?tenant=cust_free_1018&resource=payments_checkout";
    // Slice 3.33: 0.33 left after a cost of 3.
    expect((await auth(app, `${key}&cost=3`)).statusCode).toBe(204);
    expect((await auth(app, `${key}&cost=1`)).statusCode).toBe(403);
    const fresh = { "x-geoquota-tenant": "cust_free_1018", "x-geoquota-resource": "other_resource" };
    for (let i = 0; i < 3; i++)
      expect((await auth(app, "", { ...fresh, "x-geoquota-cost": "0" })).statusCode).toBe(204);
    // Nothing was counted: the slice of the default policy (1.67) still admits one.
    expect((await auth(app, "", fresh)).statusCode).toBe(204);
    expect((await auth(app, "", { ...fresh, "x-geoquota-cost": "0.5" })).statusCode).toBe(204);
    expect((await auth(app, "", fresh)).statusCode).toBe(403);
  });

  it("reads header values as UTF-8 (nginx passes the client's bytes through)", async () => {
    const { app } = await setup({ partitionKey: "raw" });
    const tenant = "ünï cødé";
    const viaHeader = await auth(app, "", {
      "x-geoquota-tenant": Buffer.from(tenant, "utf8").toString("latin1"),
      "x-geoquota-resource": "payments_checkout",
    });
    expect(viaHeader.statusCode).toBe(204);
    const viaQuery = await auth(app, `?tenant=${encodeURIComponent(tenant)}&resource=payments_checkout`);
    // The same key both ways: the slice (1.67) is spent, and the partition key is the same.
    expect(viaQuery.statusCode).toBe(403);
    const pk = (h: typeof viaHeader.headers) => parseRateLimitFields(h).limits[0]!.params.get("pk");
    expect(pk(viaQuery.headers)).toEqual(pk(viaHeader.headers));
  });

  it.each([
    ["", {}, "GQ_ERR_INVALID_BODY", "tenant"],
    ["?tenant=t", {}, "GQ_ERR_INVALID_BODY", "resource"],
    ["?tenant=t&resource=r&cost=-1", {}, "GQ_ERR_INVALID_BODY", "cost"],
    ["?tenant=t&resource=r&cost=abc", {}, "GQ_ERR_INVALID_BODY", "cost"],
    ["?tenant=t&resource=r&cost=", {}, "GQ_ERR_INVALID_BODY", "cost"],
    ["?tenant=t&resource=r&cost=1e12", {}, "GQ_ERR_INVALID_BODY", "cost"],
    ["?tenant=t&resource=r&tennant=x", {}, "GQ_ERR_INVALID_BODY", "tennant"],
    ["?tenant=t&tenant=u&resource=r", {}, "GQ_ERR_INVALID_BODY", "tenant"],
    ["?tenant=t&resource=r", { "x-geoquota-tenant": "t" }, "GQ_ERR_INVALID_BODY", "tenant"],
    ["?resource=r", { "x-geoquota-tenant": "\xff" }, "GQ_ERR_INVALID_BODY", "tenant"],
    [`?tenant=${"x".repeat(129)}&resource=r`, {}, "GQ_ERR_KEY_TOO_LONG", "tenant"],
  ])("401 (not 400) for %s %j, naming the code and field", async (query, headers, code, field) => {
    const { app } = await setup();
    const res = await auth(app, query, headers);
    expect(res.statusCode).toBe(401);
    expect(res.headers["x-geoquota-error"]).toBe(code);
    expect(res.headers["x-geoquota-field"]).toBe(field);
    const body = ErrorSchema.parse(res.json());
    expect(body).toMatchObject({ code: "GQ_ERR_AUTH_INVALID", field });
    expect(body.message.startsWith(`${field}: `)).toBe(true);
    expect(body.message).toContain(code);
  });

  it("an unhashable key (no secret configured) is a 401 too", async () => {
    const config = testConfig();
    const { sharedSecret: _s, ...rest } = config as unknown as Record<string, unknown>;
    app = await limiterApp({
      store: new FakeStore(),
      config: rest as unknown as typeof config,
      policies: testPolicies(),
    });
    const res = await auth(app, "?tenant=a:b&resource=r");
    expect(res.statusCode).toBe(401);
    expect(res.headers["x-geoquota-error"]).toBe("GQ_ERR_INVALID_KEY");
  });

  it("a deny-listed key: 403 with decision deny_list, no RateLimit fields, no Retry-After", async () => {
    const policies = parsePolicies(
      { default: { capacity: 5, refillPerSecond: 1 }, deny: [{ tenant: "abuser" }] },
      "test-policies.json",
      REGION_IDS,
    );
    const { app, store } = await setup({}, policies);
    const res = await auth(app, "?tenant=abuser&resource=r");
    expect(res.statusCode).toBe(403);
    expect(res.headers["x-geoquota-decision"]).toBe("deny_list");
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.headers.ratelimit).toBeUndefined();
    expect(res.json()).toMatchObject({ allowed: false, reason: "deny_list" });
    expect(store.calls).toHaveLength(0);
  });

  it("the region's degraded modes apply: fail closed denies (403), fail open admits (204), both marked", async () => {
    const closed = await setup();
    closed.store.failWith = new Error("down");
    const c = await auth(closed.app, "?tenant=cust_ent_9942&resource=payments_checkout");
    expect(c.statusCode).toBe(403);
    expect(c.headers["x-geoquota-decision"]).toBe("rate_limited");
    expect(c.headers["x-ratelimit-degraded"]).toBe("true");
    await closed.app.close();
    const open = await setup({ failMode: "open" });
    open.store.failWith = new Error("down");
    // The fail-open bucket starts empty (denied), then refills at the base slice's rate: 0.6 s at 5.55/s.
    expect((await auth(open.app, "?tenant=cust_ent_9942&resource=payments_checkout")).statusCode).toBe(403);
    open.clock.advance(600);
    const o = await auth(open.app, "?tenant=cust_ent_9942&resource=payments_checkout");
    expect(o.statusCode).toBe(204);
    expect(o.headers["x-ratelimit-degraded"]).toBe("true");
    expect(o.headers["x-ratelimit-scope"]).toBe("process");
  });

  it("POST is a 405 naming GET (and HEAD)", async () => {
    const { app } = await setup();
    const res = await app.inject({ method: "POST", url: "/v1/auth", payload: {} });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toContain("GET");
  });
});
