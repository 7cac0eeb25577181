import { type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createRedisStore, initFreshRegion } from "../src/redis/index.js";
import { policy, TIMING } from "./redis-helpers.js";

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

it("smoke", async () => {
  const redis = server.client();
  await initFreshRegion(redis);
  const store = createRedisStore({ redis, region: "eu", timing: TIMING });
  const p = policy();
  const d = await store.check(p, 1);
  expect(d.allowed).toBe(true);
  expect(d.tokens).toBe(9);
  for (const alg of ["gcra", "fixed_window", "sliding_window", "sliding_log"] as const) {
    const q = policy({ algorithm: alg, windowMs: 1000 });
    const r = await store.check(q, 1);
    expect(r.allowed, alg).toBe(true);
    await store.refund(q, 1);
    await store.inspect(q);
  }
  const view = await store.inspect(p);
  expect(view.counters.admitted).toBeDefined();
});
