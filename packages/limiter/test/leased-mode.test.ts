// The service with `leased.enabled`: checks are served from in-process leases,
// falling through to one store check when the leases cannot cover the cost.
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { leasedApp, withPoliciesFor } from "./helpers/leased-mode.js";
import { expectHeadersMatchBody } from "./helpers/rate-limit-fields.js";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

describe("leased mode", () => {
  it.each([
    // The config's defaults: the batch sized from the rate, 2·maxBatch + lowWater = 10,010 held
    // at most (an ending lease's rest beside a new batch), which the key's C = 1000 caps (its
    // leases are counted in the region's bucket).
    ["defaults (rate-sized)", {}, 1000],
    // maxBatch = batch: a fixed batch, batch + lowWater = 60 (a prefetch lands at the mark).
    ["a fixed batch", { batch: 50, maxBatch: 50 }, 60],
  ])(
    "serves checks from memory: a handful of store calls for many checks (%s)",
    async (_name, leased, held) => {
      const s = await leasedApp(undefined, leased);
      app = s.app;
      for (let i = 0; i < 100; i++) {
        const r = await app.inject({
          method: "POST",
          url: "/v1/check",
          payload: { tenant: "cust_ent_9942", resource: "payments_checkout" },
        });
        expect(r.statusCode).toBe(200);
        expect(r.json().degraded).toBe(false);
      }
      // A lease-served decision speaks for this process: its held tokens out of the most it holds.
      const client = app.limiter.leases.peek(app.limiter.resolve("cust_ent_9942", "payments_checkout"))!;
      await client.settled();
      const r = await app.inject({
        method: "POST",
        url: "/v1/check",
        payload: { tenant: "cust_ent_9942", resource: "payments_checkout" },
      });
      const body = r.json();
      // Its limit: the most this process holds for the key (leasedHeldBound).
      expect(body).toMatchObject({ scope: "process", limit: held, global: { limit: 1000 } });
      const f = expectHeadersMatchBody(r.headers, body);
      // Leases do not refill: the process policy has no window; the global one does.
      expect(f.scoped.params.has("w")).toBe(false);
      expect(f.global.params.get("w")).toBe(60);
      const acquires = s.store.calls.filter((c) => c.op === "acquireLease").length;
      const checks = s.store.calls.filter((c) => c.op === "check").length;
      // At least 50 per lease: ~2-3 leases, and at most a check or two while the first lease is in flight.
      expect(acquires).toBeLessThanOrEqual(4);
      expect(checks).toBeLessThanOrEqual(2);
    },
  );

  it("closing the app returns the unused leased tokens", async () => {
    const s = await leasedApp();
    await s.app.inject({
      method: "POST",
      url: "/v1/check",
      payload: { tenant: "cust_ent_9942", resource: "payments_checkout" },
    });
    await s.app.limiter.leases.peek(s.app.limiter.resolve("cust_ent_9942", "payments_checkout"))?.settled();
    await s.app.close();
    expect(s.store.released.length).toBeGreaterThan(0);
    expect(s.store.outstandingFor(s.app.limiter.resolve("cust_ent_9942", "payments_checkout"))).toBe(0);
  });

  it("window algorithms never lease (they keep static slices)", async () => {
    const s = await leasedApp(
      withPoliciesFor("win_t", "api", { algorithm: "fixed_window", capacity: 30, windowMs: 60_000 }),
    );
    app = s.app;
    await app.inject({ method: "POST", url: "/v1/check", payload: { tenant: "win_t", resource: "api" } });
    expect(s.store.calls.map((c) => c.op)).toEqual(["check"]);
    expect(app.limiter.breaker.state).toBe("closed");
  });
});
