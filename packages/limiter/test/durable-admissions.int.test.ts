// DESIGN §4, durable admissions, on real Redis with a real replica: a
// failover promotes a replica that lacks the primary's last writes. Without
// a durability wait, checks the limiter answered "allowed" are forgotten and
// the promoted replica admits the same quota again before anything notices
// the failover (the replid poll runs every redis.primaryCheckMs). With it, a
// check or a lease grant is answered as admitted only once the replica has
// the write, so what a failover forgets was never handed out.
import { parsePolicies } from "@geoquota/config";
import { type RedisServer, startRedis, startReplica } from "@geoquota/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { startRegionService } from "../src/main.js";
import { createRedisStore, initFreshRegion, NotDurableError, type RedisRegionStore } from "@geoquota/redis";
import { policy, TIMING } from "@geoquota/testkit";
import { serviceConfig } from "./helpers/config.js";

const started: RedisServer[] = [];
const stores: RedisRegionStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

async function pair(): Promise<{ primary: RedisServer; replica: RedisServer }> {
  const primary = await startRedis();
  started.push(primary);
  const replica = await startReplica(primary);
  started.push(replica);
  await initFreshRegion(primary.client());
  return { primary, replica };
}

const DURABLE = { replicas: 1, timeoutMs: 50 } as const;

function storeOn(server: RedisServer, durable: boolean): RedisRegionStore {
  const s = createRedisStore({
    redis: server.client(),
    region: "us",
    timing: TIMING,
    ...(durable ? { durability: DURABLE } : {}),
  });
  stores.push(s);
  return s;
}

/**
 * C = 20, r = 1/s. Phase 1: the replica is cut off from the primary (a
 * partition inside the region; here it stops replicating with `REPLICAOF NO
 * ONE`, which is also how it is promoted) while the primary, still taking
 * the limiter's writes, is asked for C; phase 2: failover (the old primary
 * dies, the limiter moves to the promoted replica, which lacks the phase-1
 * writes) and the new primary is asked for C again. Returns what was answered "allowed" and the Redis-TIME
 * span of the run, for the exact bound C + r·T.
 */
async function failoverRun(
  durable: boolean,
): Promise<{ admitted: number; bound: number; notDurable: number }> {
  const { primary, replica } = await pair();
  const p = policy({ capacity: 20, refillPerSecond: 1 });
  const before = storeOn(primary, durable);
  // Warm-up: the key exists on both (replicated) before the lag starts.
  expect((await before.check(p, 1)).allowed).toBe(true);
  let admitted = 1;
  let notDurable = 0;
  const firstUs = (await before.inspect(p)).nowUs;
  await replica.client().replicaof("NO", "ONE");
  for (let i = 0; i < 20; i++) {
    try {
      if ((await before.check(p, 1)).allowed) admitted += 1;
    } catch (err) {
      if (!(err instanceof NotDurableError)) throw err;
      notDurable += 1;
    }
  }
  await primary.kill();
  // The new primary has no replica yet (the operator re-attaches one later).
  const after = storeOn(replica, false);
  let lastUs = firstUs;
  for (let i = 0; i < 20; i++) {
    const d = await after.check(p, 1);
    if (d.allowed) admitted += 1;
    lastUs = d.nowUs;
  }
  return { admitted, bound: 20 + (1 * (lastUs - firstUs)) / 1e6, notDurable };
}

describe("durable admissions (DESIGN §4)", () => {
  it("without the wait, a failover forgets admissions and the promoted replica admits them again", async () => {
    const r = await failoverRun(false);
    // The hazard the wait exists for: ~40 admitted against a bound of ~20.
    expect(r.notDurable).toBe(0);
    expect(r.admitted).toBeGreaterThan(r.bound);
  });

  it("with the wait, nothing the failover forgets was answered as admitted: admitted ≤ C + r·T", async () => {
    const r = await failoverRun(true);
    expect(r.admitted).toBeLessThanOrEqual(r.bound);
    expect(r.notDurable).toBe(20);
  });

  it("a lease is granted only once the replica has it; a refused grant stays reserved (under-admits)", async () => {
    const { replica, primary } = await pair();
    const store = storeOn(primary, true);
    const p = policy({ capacity: 10, refillPerSecond: 1 });
    const ok = await store.acquireLease(p, 4, 1000);
    expect(ok.granted).toBe(4);
    replica.pause();
    try {
      await expect(store.acquireLease(p, 4, 1000)).rejects.toBeInstanceOf(NotDurableError);
      await expect(store.checkCompound([{ policy: p, cost: 1 }])).rejects.toBeInstanceOf(NotDurableError);
      // A denial needs no wait: it hands nothing out.
      const denied = await store.check(p, 50);
      expect(denied.allowed).toBe(false);
    } finally {
      replica.resume();
    }
    // Both leases and the compound check's token stay consumed: 10 − 4 − 4 − 1.
    const d = await store.check(p, 1);
    expect(d.allowed).toBe(true);
    expect(Math.floor(d.tokens)).toBe(0);
  });

  it("the service: a check the replica has not acknowledged is not admitted (a degraded deny), then admits again", async () => {
    const { replica, primary } = await pair();
    const config = serviceConfig(primary.url, 1);
    const policies = parsePolicies(
      { default: { capacity: 10, refillPerSecond: 10 }, policies: [] },
      "test-policies.json",
    );
    const svc = await startRegionService({ config, policies, port: 0, fresh: true });
    try {
      const check = () =>
        fetch(`${svc.url}/v1/check`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ tenant: "dur_t", resource: "api" }),
        });
      expect(((await (await check()).json()) as { allowed: boolean }).allowed).toBe(true);
      replica.pause();
      let held: Response;
      try {
        held = await check();
      } finally {
        replica.resume();
      }
      const body = (await held.json()) as { allowed: boolean; degraded: boolean };
      expect(body.allowed).toBe(false);
      expect(body.degraded).toBe(true);
      expect(((await (await check()).json()) as { allowed: boolean }).allowed).toBe(true);
    } finally {
      await svc.close();
    }
  });
});
