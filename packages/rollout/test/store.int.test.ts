import { type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decodeSnapshot,
  encodeSnapshot,
  PROPOSALS_KEY,
  popProposals,
  pushProposal,
  readSnapshot,
  SNAPSHOT_KEY,
  seedSnapshot,
  seedState,
  snapshotOf,
  snapshotReader,
  writeSnapshot,
} from "../src/index.js";

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

describe("the rollout's Redis keys", () => {
  it("seeds a fresh region once, reads it back, rewrites it", async () => {
    const redis = server.client();
    await redis.flushall();
    expect(await readSnapshot(redis)).toBeNull();
    const where = { region: "a", regions: ["a", "b"] };
    expect(await seedSnapshot(redis, { default: { capacity: 5, refillPerSecond: 1 } }, where)).toBe(true);
    expect(await seedSnapshot(redis, { default: { capacity: 9, refillPerSecond: 1 } }, where)).toBe(false);
    const read = await readSnapshot(redis);
    expect(read).toMatchObject({ ok: true, value: { region: "a", phase: "stable", target: { version: 0 } } });
    if (!read?.ok) throw new Error("unreachable");
    expect(read.value.docs[0]?.policies).toEqual({ default: { capacity: 5, refillPerSecond: 1 } });
    const next = encodeSnapshot(snapshotOf(seedState("a", ["a", "b"], { default: { capacity: 7 } }), 2, 0));
    expect(await writeSnapshot(redis, next, { replicas: 0 })).toBe(true);
    expect(await redis.get(SNAPSHOT_KEY)).toBe(next);
    // One replica configured and no certifier to prove it: not durable.
    expect(await writeSnapshot(redis, next, { replicas: 1 })).toBe(false);
    await redis.set(SNAPSHOT_KEY, '{"format":1}');
    const bad = await readSnapshot(redis);
    expect(bad).toMatchObject({ ok: false, error: expect.stringContaining("region:") });
    expect(decodeSnapshot(next).ok).toBe(true);
  });

  it("proposals come back in order; a malformed one is an error, consumed", async () => {
    const redis = server.client();
    await redis.del(PROPOSALS_KEY);
    await pushProposal(redis, { proposalId: "p1", policies: { x: 1 }, at: 1 });
    await redis.rpush(PROPOSALS_KEY, "not json");
    await pushProposal(redis, { proposalId: "p2", policies: { x: 2 }, at: 2 });
    const got = await popProposals(redis, 10);
    expect(got).toMatchObject([
      { ok: true, value: { proposalId: "p1" } },
      { ok: false, error: expect.stringContaining("not JSON") },
      { ok: true, value: { proposalId: "p2" } },
    ]);
    expect(await redis.llen(PROPOSALS_KEY)).toBe(0);
  });

  it("a poller's reader decodes a snapshot once while its text is unchanged, again when it changes", async () => {
    const redis = server.client();
    await redis.flushall();
    const read = snapshotReader(redis);
    expect(await read()).toBeNull();
    const where = { region: "a", regions: ["a", "b"] };
    await seedSnapshot(redis, { default: { capacity: 5, refillPerSecond: 1 } }, where);
    const first = await read();
    expect(first).toMatchObject({ ok: true, value: { target: { version: 0 } } });
    // Unchanged text: the same decoded value (the limiter's poll, 4 a second, validates nothing again).
    expect(await read()).toBe(first);
    expect(await read()).toBe(first);
    const next = encodeSnapshot(snapshotOf(seedState("a", ["a", "b"], { default: { capacity: 7 } }), 2, 0));
    await redis.set(SNAPSHOT_KEY, next);
    const second = await read();
    expect(second).not.toBe(first);
    expect(second).toEqual(decodeSnapshot(next));
    // A bad text is reported as such, not hidden behind the last good one.
    await redis.set(SNAPSHOT_KEY, "{");
    expect(await read()).toMatchObject({ ok: false });
    await redis.del(SNAPSHOT_KEY);
    expect(await read()).toBeNull();
  });
});
