// A key's view (inspect.lua: /v1/quotas and the gossip daemon's reads) comes
// from the region's primary only. A replica just after a diskless full sync
// serves its snapshot for up to ~1 s, and an address moved to it before its
// promotion made a region's view show a loan it had already returned (and
// shipped as returned) as still in use: Σ shares above U in the soak (seed
// 26005, a failback behind one address). The script refuses on a replica.
import { type RedisServer, startRedis, startReplica } from "@geoquota/testkit";
import { createGossipStore, createRedisStore, initFreshRegion, type RedisRegionStore } from "@geoquota/redis";
import { afterEach, describe, expect, it } from "vitest";
import { policy, TIMING } from "./redis-helpers.js";

const servers: RedisServer[] = [];
const stores: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function primaryAndReplica(): Promise<{ primary: RedisServer; replica: RedisServer }> {
  const primary = await startRedis();
  servers.push(primary);
  const replica = await startReplica(primary);
  servers.push(replica);
  await initFreshRegion(primary.client());
  return { primary, replica };
}

function storeOn(server: RedisServer): RedisRegionStore {
  const s = createRedisStore({ redis: server.client(), region: "eu", timing: TIMING });
  stores.push(s);
  return s;
}

describe("a key's view on a replica", () => {
  it("is refused (READONLY) where the primary answers, for the service's view and the daemon's read", async () => {
    const { primary, replica } = await primaryAndReplica();
    const p = policy({ capacity: 100, refillPerSecond: 1 });
    const onPrimary = storeOn(primary);
    expect((await onPrimary.check(p, 3)).allowed).toBe(true);
    // The replica holds the key (WAIT 1 on the primary: acknowledged).
    expect(await primary.client().wait(1, 5000)).toBe(1);

    const view = await onPrimary.inspect(p);
    expect(view.share).toBeGreaterThan(0);

    await expect(storeOn(replica).inspect(p)).rejects.toThrow(/READONLY/);
    const gossip = createGossipStore({ redis: replica.client(), region: "eu", timing: TIMING });
    await expect(gossip.readKeyState(p)).rejects.toThrow(/READONLY/);
    // Refusing wrote nothing on the primary either: the view is still a pure read there.
    const before = await primary.client().dbsize();
    await onPrimary.inspect(p);
    expect(await primary.client().dbsize()).toBe(before);
  });
});
