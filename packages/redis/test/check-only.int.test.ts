// A check-only item of a compound check (cost 0, need 1: the RLS's hits_addend 0) on real
// Redis: it passes only while its limit holds one unit, charges nothing, and when it fails
// the whole check is denied — the other items are not charged either.
import { keyPolicy, redisPerFile } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { createRedisStore, initFreshRegion } from "../src/index.js";

const fx = redisPerFile(async (redis) => {
  await initFreshRegion(redis);
  return createRedisStore({ redis, region: "us", timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 } });
});

let n = 0;
const fresh = (algorithm: "token_bucket" | "fixed_window") =>
  algorithm === "token_bucket"
    ? keyPolicy({ tenant: `co${++n}`, resource: "a", capacity: 3, refillPerSecond: 0.001 })
    : keyPolicy({
        tenant: `co${++n}`,
        resource: "a",
        algorithm,
        capacity: 3,
        refillPerSecond: 3,
        windowMs: 3_600_000,
      });

describe.each(["token_bucket", "fixed_window"] as const)("check-only compound item (%s)", (algorithm) => {
  it("passes while one unit is left, charging nothing; the charged item pays its cost", async () => {
    const store = fx.setup;
    const watched = fresh(algorithm);
    const charged = { ...fresh(algorithm), tenant: watched.tenant, resource: "b" };
    await store.check(watched, 2);
    const d = await store.checkCompound([
      { policy: charged, cost: 1 },
      { policy: watched, cost: 0, need: 1 },
    ]);
    expect(d.allowed).toBe(true);
    expect(Math.floor(d.parts[1]!.remaining)).toBe(1);
    // Nothing was taken from the watched limit: its last unit is still there.
    expect((await store.check(watched, 1)).allowed).toBe(true);
    expect(Math.floor(d.parts[0]!.remaining)).toBe(2);
  });

  it("denies the whole check when the watched limit is spent, and the other item is not charged", async () => {
    const store = fx.setup;
    const watched = fresh(algorithm);
    const charged = { ...fresh(algorithm), tenant: watched.tenant, resource: "b" };
    await store.check(watched, 3);
    const d = await store.checkCompound([
      { policy: charged, cost: 2 },
      { policy: watched, cost: 0, need: 1 },
    ]);
    expect(d.allowed).toBe(false);
    expect(d.failedIndex).toBe(1);
    // The charged limit still holds all three.
    expect((await store.check(charged, 3)).allowed).toBe(true);
  });

  it("without needs, a cost-0 item passes even with nothing left (the old contract, unchanged)", async () => {
    const store = fx.setup;
    const watched = fresh(algorithm);
    await store.check(watched, 3);
    const d = await store.checkCompound([{ policy: watched, cost: 0 }]);
    expect(d.allowed).toBe(true);
  });
});
