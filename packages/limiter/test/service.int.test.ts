// The service against a real redis-server: the HTTP contract end to end, and
// Redis killed mid-run (breaker opens, leased tokens keep serving, nothing
// beyond them is admitted, recovery when Redis returns).
import { parsePolicies } from "@geoquota/config";
import { checkGlobalBound, type RedisServer, startRedis, waitFor } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashKey, keyHashSecretOf } from "@geoquota/core";
import { type RegionService, runRegion, startRegionService } from "../src/main.js";
import { expectHeadersMatchBody } from "./helpers/rate-limit-fields.js";
import { regionConfig } from "./helpers/config.js";

const policies = parsePolicies(
  {
    default: { capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
    policies: [
      {
        tenant: "cust_ent_9942",
        resource: "payments_checkout",
        capacity: 1000,
        refill: { tokens: 1000, perSeconds: 60 },
      },
      // Refill is negligible over the test, so admissions are counted exactly.
      { tenant: "kill_t", resource: "api", capacity: 100, refillPerSecond: 0.0001 },
      { tenant: "oracle_t", resource: "api", capacity: 60, refillPerSecond: 40 },
    ],
  },
  "test-policies.json",
);

function config(redisUrl: string, leased: boolean, replicated = true) {
  return regionConfig(
    { url: redisUrl, timeoutMs: 50 },
    {
      policy: { replicated, limiterStaleMs: 1000 },
      breaker: { failureThreshold: 2, openMs: 200, halfOpenProbes: 1, closeAfterSuccesses: 1 },
      // The batch sized from the rate, as the config defaults (maxBatch 100 × batch = 1000).
      leased: { enabled: leased, batch: 10, lowWater: 3, durationMs: 2000, marginMs: 100 },
    },
  );
}

const post = async (svc: RegionService, body: unknown) => {
  const res = await fetch(`${svc.url}/v1/check`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
};

describe("service on real Redis", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("serves the contract over HTTP", async () => {
    const svc = await startRegionService({ config: config(redis.url, false), policies, fresh: true });
    try {
      const ok = await post(svc, { tenant: "cust_ent_9942", resource: "payments_checkout", cost: 2.5 });
      expect(ok.status).toBe(200);
      // Half of C = 1000 (two regions): a slice of 500, 2.5 spent → 497 whole tokens.
      expect(ok.body).toMatchObject({
        allowed: true,
        limit: 500,
        remaining: 497,
        scope: "region",
        global: { limit: 1000 },
        region: "us-east",
        degraded: false,
      });
      expect(ok.headers.get("ratelimit-remaining")).toBe("497");
      expectHeadersMatchBody(Object.fromEntries(ok.headers), ok.body as never);
      const first = await post(svc, { tenant: "anon_x", resource: "payments_checkout", cost: 2 });
      expect(first.status).toBe(200);
      const denied = await post(svc, { tenant: "anon_x", resource: "payments_checkout", cost: 1 });
      expect(denied.status).toBe(429);
      expect(Number(denied.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expectHeadersMatchBody(Object.fromEntries(denied.headers), denied.body as never);
      const compound = await post(svc, {
        limits: [
          { tenant: "cust_ent_9942", resource: "payments_checkout", cost: 1 },
          { tenant: "anon_x", resource: "payments_checkout", cost: 1 },
        ],
      });
      expect(compound.status).toBe(429);
      expect(compound.body.failedIndex).toBe(1);
      const q = (await (
        await fetch(`${svc.url}/v1/quotas/cust_ent_9942/payments_checkout`)
      ).json()) as Record<string, unknown>;
      expect(q.share).toBe(500_000);
      expect(q.regions).toEqual([
        { id: "us-east", baseShare: 500_000, floorShare: 20_000 },
        { id: "eu-west", baseShare: 500_000, floorShare: 20_000 },
      ]);
      // The compound denial charged nothing: only the 2.5 of the first check.
      expect(Object.values((q.counters as { admitted: Record<string, number> }).admitted)).toEqual([2.5]);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
      // Keys with any characters reach the Lua scripts hashed, and inspection finds them by the original.
      const odd = { tenant: "user:123@example.com", resource: "payments_checkout" };
      expect((await post(svc, odd)).status).toBe(200);
      const view = await fetch(`${svc.url}/v1/quotas/${encodeURIComponent(odd.tenant)}/${odd.resource}`);
      expect(view.status).toBe(200);
      const v = (await view.json()) as { key: string; counters: { admitted: Record<string, number> } };
      expect(v.key).toBe(hashKey(keyHashSecretOf(config(redis.url, false))!, odd.tenant));
      expect(Object.values(v.counters.admitted)).toEqual([1]);
    } finally {
      await svc.close();
    }
  });

  it("Redis killed: breaker opens, leased tokens serve, nothing beyond them; recovers when Redis returns", async () => {
    // Policies from the file: with replicated policies and no gossip daemon to write them
    // again, the wiped Redis would leave this region without policies (next test).
    const svc = await startRegionService({ config: config(redis.url, true, false), policies, fresh: true });
    try {
      const key = { tenant: "kill_t", resource: "api" };
      // Warm up: the first check goes to Redis and starts a lease; then leases serve.
      for (let i = 0; i < 3; i++) expect((await post(svc, key)).status).toBe(200);
      const client = svc.limiter.leases.peek(svc.limiter.resolve("kill_t", "api"))!;
      await client.settled();
      const held = client.available();
      expect(held).toBeGreaterThan(0);

      await redis.kill();
      let admittedDuringOutage = 0;
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        const r = await post(svc, key);
        statuses.push(r.status);
        if (r.status === 200) admittedDuringOutage++;
        if (r.status === 200) expect(r.body.scope).toBe("process");
        if (r.status === 429) {
          expect(r.body.degraded).toBe(true);
          expect(r.headers.get("x-ratelimit-degraded")).toBe("true");
        }
      }
      // Exactly the tokens leased before the crash, then denials.
      expect(admittedDuringOutage).toBe(held);
      expect(statuses.slice(held).every((s) => s === 429)).toBe(true);
      await waitFor("breaker open", async () => svc.limiter.breaker.state !== "closed");
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(503);
      const metrics = await (await fetch(`${svc.url}/metrics`)).text();
      expect(metrics).toMatch(
        /geoquota_redis_errors_total\{op="\w+",kind="(error|timeout|breaker_open)"\} [1-9]/,
      );

      await redis.restart();
      await waitFor("breaker closed again", async () => {
        await post(svc, key);
        return svc.limiter.breaker.state === "closed";
      });
      const after = await post(svc, key);
      expect(after.body.degraded).toBe(false);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
      // The restarted Redis lost its state: the region is in recovery and its
      // buckets start empty (DESIGN §4), so it is conservative, never over.
      expect(after.status).toBe(429);
    } finally {
      await svc.close();
    }
  });

  it("replicated policies without a daemon: once the snapshot is gone and the last read stale, checks fail closed", async () => {
    const c = redis.client();
    await c.flushall();
    const svc = await startRegionService({ config: config(redis.url, false), policies, fresh: true });
    try {
      const key = { tenant: "gone_t", resource: "api" };
      expect((await post(svc, key)).status).toBe(200);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
      await c.del("gq:policy"); // what a wiped Redis looks like to the limiter
      await waitFor("policy unknown", async () => (await fetch(`${svc.url}/readyz`)).status === 503, 5000);
      const r = await post(svc, key);
      expect(r.status).not.toBe(200);
      expect(r.body.degraded).toBe(true);
      const ready = (await (await fetch(`${svc.url}/readyz`)).json()) as { code: string };
      expect(ready.code).toBe("GQ_ERR_POLICY_UNKNOWN");
    } finally {
      c.disconnect();
      await svc.close();
    }
  });

  it("runRegion loads a config file and its policies, listens, and closes", async () => {
    // The previous test restarted Redis (a new incarnation, in recovery): start clean.
    const c = redis.client();
    await c.flushall();
    c.disconnect();
    const dir = mkdtempSync(join(tmpdir(), "gq-region-"));
    writeFileSync(
      join(dir, "pol.json"),
      JSON.stringify({ default: { capacity: 10, refillPerSecond: 1 }, policies: [] }),
    );
    writeFileSync(
      join(dir, "r.json"),
      JSON.stringify({
        region: "solo",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: redis.url },
        regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
        gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
        sharedSecret: { env: "GQ_TEST_SECRET" },
        adminToken: "test-admin-token-0123456789",
        policiesFile: "pol.json",
      }),
    );
    const svc = await runRegion(join(dir, "r.json"), {
      handleSignals: false,
      logger: false,
      fresh: true,
      env: { GQ_TEST_SECRET: "s".repeat(16) },
    });
    try {
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
      const r = await post(svc, { tenant: "someone", resource: "api", cost: 10 });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        region: "solo",
        limit: 10,
        remaining: 0,
        global: { limit: 10 },
        degraded: false,
      });
    } finally {
      await svc.close();
    }
  });

  it.each([false, true])(
    "HTTP clients against one key (leased=%s): the exact oracle holds",
    async (leased) => {
      const c = redis.client();
      await c.flushall();
      c.disconnect();
      const svc = await startRegionService({ config: config(redis.url, leased), policies, fresh: true });
      try {
        // Two regions: this one holds half of C = 60, r = 40/s; the oracle checks the global bound.
        const admissions: { sentMs: number; answeredMs: number; cost: number }[] = [];
        const until = performance.now() + 2000;
        let denied = 0;
        await Promise.all(
          Array.from({ length: 12 }, async (_, w) => {
            while (performance.now() < until) {
              const cost = w % 3 === 0 ? 1.5 : 1;
              const sentMs = performance.now();
              const r = await post(svc, { tenant: "oracle_t", resource: "api", cost });
              const answeredMs = performance.now();
              if (r.status === 200) admissions.push({ sentMs, answeredMs, cost });
              else denied++;
            }
          }),
        );
        const verdict = checkGlobalBound(admissions, { capacity: 60, refillPerSecond: 40 });
        expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
        expect(denied).toBeGreaterThan(0);
        // This region's own slice bound holds too: C/2 + r/2·T.
        const slice = checkGlobalBound(admissions, { capacity: 30, refillPerSecond: 20 });
        expect(slice.ok, JSON.stringify(slice.worstInterval)).toBe(true);
      } finally {
        await svc.close();
      }
    },
  );
});
