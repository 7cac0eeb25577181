// The `resource` label takes values only from configured policies: a request
// body naming any other resource must not create a series.
import { readFileSync } from "node:fs";
import { parsePolicies } from "@geoquota/config";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { ADMIN_TOKEN, manualClock, REGION_IDS, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const metrics = async (a: FastifyInstance) => (await a.inject({ method: "GET", url: "/metrics" })).body;

describe("metric label cardinality", () => {
  it('collapses resources no policy names into resource="other"; a policy added later gets its own', async () => {
    app = await limiterApp({
      store: new FakeStore(),
      // One region: the admin PUT below applies in this process (issue 21).
      config: testConfig({ regions: [{ id: "us-east", gossip: "127.0.0.1:7301" }] }),
      policies: testPolicies(),
      clock: manualClock().now,
    });
    for (const resource of ["anything_1", "anything_2", "payments_checkout"]) {
      const res = await app.inject({ method: "POST", url: "/v1/check", payload: { tenant: "t1", resource } });
      expect(res.statusCode).toBe(200);
    }
    let text = await metrics(app);
    expect(text).not.toContain("anything_");
    expect(text).toContain('geoquota_share_ratio{key_class="default",resource="other"}');
    expect(text).toContain('geoquota_share_ratio{key_class="default",resource="payments_checkout"}');

    await app.inject({
      method: "PUT",
      url: "/v1/policies/*/anything_1",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 1 },
    });
    await app.inject({ method: "POST", url: "/v1/check", payload: { tenant: "t1", resource: "anything_1" } });
    text = await metrics(app);
    expect(text).toContain('geoquota_share_ratio{key_class="default",resource="anything_1"}');
    expect(text).not.toContain("anything_2");
  });
});

describe("per-key-class series (issue 22)", () => {
  const policiesFile = new URL("../../../regions/policies.json", import.meta.url);
  const doc = JSON.parse(readFileSync(policiesFile, "utf8")) as {
    default: unknown;
    policies: { tenant: string; resource: string }[];
  };

  it("decisions count by key class (explicit tenants only, else default), resource and result", async () => {
    app = await limiterApp({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
    const check = (tenant: string) =>
      app!.inject({ method: "POST", url: "/v1/check", payload: { tenant, resource: "payments_checkout" } });
    await check("cust_ent_9942");
    // Each unnamed tenant has its own bucket of the default slice (1.67 tokens): 2 admitted, 1 denied.
    for (const t of ["walk_in_1", "walk_in_1", "walk_in_2"]) await check(t);
    const text = await metrics(app);
    expect(text).toContain(
      'geoquota_key_decisions_total{key_class="cust_ent_9942",resource="payments_checkout",result="allowed"} 1',
    );
    // Two unnamed tenants, one series per result.
    expect(text).toContain(
      'geoquota_key_decisions_total{key_class="default",resource="payments_checkout",result="allowed"} 2',
    );
    expect(text).toContain(
      'geoquota_key_decisions_total{key_class="default",resource="payments_checkout",result="denied"} 1',
    );
    expect(text).not.toContain("walk_in");
  });

  it("a removed policy's share and decision series are gone at the next scrape", async () => {
    app = await limiterApp({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
    for (const tenant of ["cust_ent_9942", "cust_free_1018"])
      await app.inject({
        method: "POST",
        url: "/v1/check",
        payload: { tenant, resource: "payments_checkout" },
      });
    let text = await metrics(app);
    expect(text).toContain('geoquota_share_ratio{key_class="cust_ent_9942",resource="payments_checkout"}');
    expect(text).toContain('geoquota_key_decisions_total{key_class="cust_ent_9942"');
    // The enterprise tenant's policy is removed; the free tenant's stays.
    const without = {
      ...doc,
      policies: doc.policies.filter((p) => p.tenant !== "cust_ent_9942"),
    };
    app.limiter.setPolicies(parsePolicies(without, "policies-without-ent.json", REGION_IDS));
    text = await metrics(app);
    expect(text).not.toContain('key_class="cust_ent_9942"');
    expect(text).toContain('geoquota_share_ratio{key_class="cust_free_1018",resource="payments_checkout"}');
    expect(text).toContain('geoquota_key_decisions_total{key_class="cust_free_1018"');
  });
});
