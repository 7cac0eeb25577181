// The `resource` label takes values only from configured policies: a request
// body naming any other resource must not create a series.
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { ADMIN_TOKEN, manualClock, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const metrics = async (a: FastifyInstance) => (await a.inject({ method: "GET", url: "/metrics" })).body;

describe("metric label cardinality", () => {
  it('collapses resources no policy names into resource="other"; a policy added later gets its own', async () => {
    app = await buildApp({
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
