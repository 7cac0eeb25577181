// The HTTP contract beyond the basic decision (app.test.ts): the 200-on-deny
// option, keys with any characters (hashed, consistently across regions, and
// found again by quota inspection), and the OpenAPI document.
import { Validator } from "@seriousme/openapi-schema-validator";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { hashKey, keyHashSecretOf } from "@geoquota/core";
import type { z } from "zod";
import {
  CheckResponseSchema,
  DecisionSchema,
  ErrorSchema,
  HealthSchema,
  PolicyListSchema,
  QuotaViewSchema,
  ReadySchema,
} from "../src/validation.js";
import { ADMIN_TOKEN, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { expectHeadersMatchBody, parseRateLimitFields } from "./helpers/rate-limit-fields.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
});

async function setup(patch: Record<string, unknown> = {}, drop: readonly string[] = []) {
  const store = new FakeStore();
  const config: Record<string, unknown> = { ...testConfig(patch) };
  for (const k of drop) delete config[k];
  const app = await limiterApp({
    store,
    config: config as unknown as ReturnType<typeof testConfig>,
    policies: testPolicies(),
  });
  apps.push(app);
  return { app, store };
}

const check = (a: FastifyInstance, payload: Record<string, unknown>) =>
  a.inject({ method: "POST", url: "/v1/check", payload });

describe("deniedStatus", () => {
  it("200 with allowed: false, the same headers (Retry-After too) and body", async () => {
    const { app } = await setup({ deniedStatus: 200 });
    const key = { tenant: "nobody_known", resource: "payments_checkout" };
    expect((await check(app, key)).json().allowed).toBe(true);
    const denied = await check(app, key);
    expect(denied.statusCode).toBe(200);
    expect(denied.json()).toMatchObject({ allowed: false, remaining: 0, scope: "region" });
    expect(Number(denied.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expectHeadersMatchBody(denied.headers, DecisionSchema.parse(denied.json()));
    const compound = await check(app, { limits: [key] });
    expect(compound.statusCode).toBe(200);
    expect(compound.json()).toMatchObject({ allowed: false, failedIndex: 0 });
    // Invalid input is still an error status.
    expect((await check(app, { tenant: "t" })).statusCode).toBe(400);
  });

  it("defaults to 429", async () => {
    const { app } = await setup();
    const key = { tenant: "nobody_known", resource: "payments_checkout" };
    await check(app, key);
    expect((await check(app, key)).statusCode).toBe(429);
  });
});

describe("keys with any characters", () => {
  const odd = ["user:123", "a@b.example", "dGVzdC1rZXk+/w==", "ünï cødé", "x".repeat(120) + ":{}"];

  // partitionKey "raw": the headers' pk shows the stored key (the default hashes it again).
  it("are admitted and stored as the HMAC, never raw", async () => {
    const { app } = await setup({ partitionKey: "raw" });
    const secret = keyHashSecretOf(testConfig())!;
    for (const tenant of odd) {
      const res = await check(app, { tenant, resource: "payments_checkout" });
      expect(res.statusCode).toBe(200);
      const f = expectHeadersMatchBody(res.headers, res.json());
      expect(f.pk).toBe(`${hashKey(secret, tenant)}|payments_checkout`);
    }
    // A resource too; and within compound checks.
    const r = await check(app, { tenant: "cust_ent_9942", resource: "api:v1/orders" });
    expect(r.statusCode).toBe(200);
    expect(parseRateLimitFields(r.headers).limits).toHaveLength(1);
    const c = await check(app, {
      limits: [
        { tenant: "user:456", resource: "payments_checkout" },
        { tenant: "c@d.example", resource: "payments_checkout" },
      ],
    });
    expect(c.statusCode).toBe(200);
  });

  it("hash to the same stored name in every region sharing the secret", async () => {
    const names = async (patch: Record<string, unknown>) => {
      const { app } = await setup({ partitionKey: "raw", ...patch });
      const out: (string | undefined)[] = [];
      for (const tenant of odd) {
        const res = await check(app, { tenant, resource: "payments_checkout" });
        out.push(expectHeadersMatchBody(res.headers, res.json()).pk);
      }
      return out;
    };
    const east = await names({});
    expect(await names({ region: "eu-west" })).toEqual(east);
    expect(await names({ region: "ap-south" })).toEqual(east);
    // A different shared secret is a different key space: regions must agree on it.
    const other = await names({ sharedSecret: "another-shared-secret-0123" });
    for (let i = 0; i < odd.length; i++) expect(other[i]).not.toBe(east[i]);
    // keyHashSecret, when set, is the secret (then unnamed readable tenants are hashed too).
    const explicit = await names({ keyHashSecret: "explicit-hash-secret-0123" });
    expect(explicit[0]).toBe(`${hashKey("explicit-hash-secret-0123", odd[0]!)}|payments_checkout`);
  });

  it("quota inspection accepts the original key", async () => {
    const { app } = await setup();
    // Default policy: a slice of 1.67 tokens; the second check is denied, only one admitted.
    expect((await check(app, { tenant: "user:123", resource: "payments_checkout" })).statusCode).toBe(200);
    expect((await check(app, { tenant: "user:123", resource: "payments_checkout" })).statusCode).toBe(429);
    await check(app, { tenant: "user:1234", resource: "payments_checkout" });
    const res = await app.inject({
      method: "GET",
      url: `/v1/quotas/${encodeURIComponent("user:123")}/payments_checkout`,
    });
    expect(res.statusCode).toBe(200);
    const q = QuotaViewSchema.parse(res.json());
    expect(q.tenant).toBe("user:123");
    expect(q.key).toBe(hashKey(keyHashSecretOf(testConfig())!, "user:123"));
    expect(q.resourceKey).toBeUndefined();
    expect(res.json().counters.admitted).toEqual({ "us-east.1": 1 });
    expect(res.json().counters.denied).toEqual({ "us-east.1": 1 });
    // A 128-character key is inspectable too (no 414), encoded.
    const long = `${"é".repeat(127)}:`;
    expect((await check(app, { tenant: long, resource: "payments_checkout" })).statusCode).toBe(200);
    const l = await app.inject({
      method: "GET",
      url: `/v1/quotas/${encodeURIComponent(long)}/payments_checkout`,
    });
    expect(l.statusCode).toBe(200);
    expect(l.json().counters.admitted).toEqual({ "us-east.1": 1 });
  });

  it("without any secret, other characters are a 400 naming the field", async () => {
    const { app } = await setup({}, ["sharedSecret"]);
    const res = await check(app, { tenant: "t", resource: "a:b" });
    expect(res.statusCode).toBe(400);
    expect(ErrorSchema.parse(res.json())).toMatchObject({ code: "GQ_ERR_INVALID_KEY", field: "resource" });
    expect((await check(app, { tenant: "t", resource: "ab" })).statusCode).toBe(200);
  });
});

describe("GET /openapi.json", () => {
  /** The service's routes, as a user sees them (the document must list exactly these). */
  const ROUTES = [
    "DELETE /v1/policies/{tenant}/{resource}",
    "GET /healthz",
    "GET /metrics",
    "GET /openapi.json",
    "GET /readyz",
    "GET /v1/auth",
    "GET /v1/policies",
    "GET /v1/policy",
    "GET /v1/policy/history",
    "GET /v1/quotas/{tenant}/{resource}",
    "POST /v1/check",
    "POST /v1/quotas/{tenant}/{resource}/reset",
    "POST /v1/refund",
    "PUT /v1/policies/{tenant}/{resource}",
    "PUT /v1/policy",
  ];

  async function document(app: FastifyInstance) {
    const res = await app.inject({ method: "GET", url: "/openapi.json" });
    expect(res.statusCode).toBe(200);
    return res.json() as {
      openapi: string;
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, unknown> };
    };
  }

  it("is a valid OpenAPI 3.1 document", async () => {
    const { app } = await setup();
    const doc = await document(app);
    const result = await new Validator().validate(doc as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe("3.1.0");
    // Every $ref resolves to a component that is a schema, not another bare reference.
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map(
      (m) => m[1]!,
    );
    expect(refs.length).toBeGreaterThan(0);
    for (const id of new Set(refs)) {
      const target = doc.components.schemas[id] as Record<string, unknown> | undefined;
      expect(target, id).toBeDefined();
      expect(Object.keys(target!), id).not.toEqual(["$ref"]);
    }
  });

  it("lists exactly the routes the app registers", async () => {
    const { app } = await setup();
    const doc = await document(app);
    const listed = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    expect(listed).toEqual(ROUTES);
    for (const r of listed) {
      const [method, path] = r.split(" ") as [string, string];
      const url = path.replace(/\{([A-Za-z0-9_]+)\}/g, ":$1");
      expect(app.hasRoute({ method: method as "GET", url })).toBe(true);
    }
    // And every product route answers something other than "no such route".
    const probes: [string, string][] = ROUTES.map((r) => {
      const [method, path] = r.split(" ") as [string, string];
      return [method, path.replace("{tenant}", "t").replace("{resource}", "r")];
    });
    for (const [method, url] of probes) {
      const res = await app.inject(
        method === "GET" ? { method: "GET", url } : { method: method as "POST", url, payload: {} },
      );
      expect(res.statusCode, `${method} ${url}`).not.toBe(404);
    }
  });

  it("documents the check body and responses from the same schemas the service uses", async () => {
    const { app } = await setup();
    const doc = await document(app);
    const op = doc.paths["/v1/check"]!.post!;
    const body = JSON.stringify(op.requestBody);
    expect(body).toContain("#/components/schemas/SingleCheck");
    expect(body).toContain("#/components/schemas/CompoundCheck");
    expect(Object.keys(op.responses as object).sort()).toEqual(["200", "400", "403", "415", "429"]);
    const single = doc.components.schemas.SingleCheck as { required: string[]; properties: object };
    expect(single.required.sort()).toEqual(["resource", "tenant"]);
    expect(Object.keys(single.properties).sort()).toEqual(["cost", "resource", "tenant"]);
    const decision = doc.components.schemas.Decision as { required: string[] };
    for (const f of [
      "allowed",
      "limit",
      "remaining",
      "resetSeconds",
      "retryAfterSeconds",
      "region",
      "degraded",
    ]) {
      expect(decision.required).toContain(f);
    }
    expect(JSON.stringify(doc.paths["/v1/policies"]!.get!.security)).toBe('[{"bearer":[]}]');
    // What the service answers parses with the documented schema.
    const res = await check(app, { tenant: "cust_ent_9942", resource: "payments_checkout" });
    expect(() => CheckResponseSchema.parse(res.json())).not.toThrow();
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const answers: [string, Record<string, string>, z.ZodType][] = [
      ["/healthz", {}, HealthSchema],
      ["/readyz", {}, ReadySchema],
      ["/v1/quotas/cust_ent_9942/payments_checkout", {}, QuotaViewSchema],
      ["/v1/policies", auth, PolicyListSchema],
      ["/v1/policies", {}, ErrorSchema],
    ];
    for (const [url, headers, schema] of answers) {
      const r = await app.inject({ method: "GET", url, headers });
      expect(() => schema.parse(r.json()), url).not.toThrow();
    }
  });
});
