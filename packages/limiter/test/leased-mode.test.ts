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
  it("serves checks from memory: a handful of store calls for many checks", async () => {
    const s = await leasedApp();
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
    // It holds at most batch + lowWater = 60 (a prefetch lands at the low-water mark).
    expect(body).toMatchObject({ scope: "process", limit: 60, global: { limit: 1000 } });
    const f = expectHeadersMatchBody(r.headers, body);
    // Leases do not refill: the process policy has no window; the global one does.
    expect(f.scoped.params.has("w")).toBe(false);
    expect(f.global.params.get("w")).toBe(60);
    const acquires = s.store.calls.filter((c) => c.op === "acquireLease").length;
    const checks = s.store.calls.filter((c) => c.op === "check").length;
    // Batches of 50: ~2-3 leases, and at most a check or two while the first lease is in flight.
    expect(acquires).toBeLessThanOrEqual(4);
    expect(checks).toBeLessThanOrEqual(2);
  });

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
