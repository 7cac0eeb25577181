// The recovery watcher behind geoquota_region_recovering and the
// recovery_started/ended events reads every shard's incarnation marker, on a
// standalone Redis and on a real 3-master Cluster.
import { initFreshRegion } from "@geoquota/limiter";
import { rotateIncarnation } from "@geoquota/redis";
import { type RedisClusterServers, type RedisServer, startRedis, startRedisCluster } from "@geoquota/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { readRecovery, recoveryOf } from "../src/daemon/recovery.js";

const timing = { loanDurationMs: 1000, epsilonMs: 50 };

describe("recoveryOf", () => {
  it("is recovering while some marker is younger than D + 2ε; missing markers do not count", () => {
    const span = 1_100_000;
    expect(recoveryOf([null, "a:0", `b:${5_000_000}`], 5_000_000 + span - 1, timing)).toEqual({
      recovering: true,
      shards: 1,
      untilUs: 5_000_000 + span,
    });
    expect(recoveryOf([null, "a:0", `b:${5_000_000}`], 5_000_000 + span, timing)).toEqual({
      recovering: false,
      shards: 0,
      untilUs: 0,
    });
  });
});

describe("readRecovery", () => {
  let single: RedisServer | undefined;
  let cluster: RedisClusterServers | undefined;
  afterAll(async () => {
    await single?.stop();
    await cluster?.stop();
  });

  it("standalone: fresh region is not recovering; a rotated incarnation is, on every shard", async () => {
    single = await startRedis();
    const redis = single.client();
    await initFreshRegion(redis);
    expect((await readRecovery(redis, timing)).recovering).toBe(false);
    await rotateIncarnation(redis);
    expect(await readRecovery(redis, timing)).toMatchObject({ recovering: true, shards: 256 });
  });

  it("cluster: markers on every master are read", async () => {
    cluster = await startRedisCluster(3);
    const redis = await cluster.client();
    await initFreshRegion(redis);
    expect((await readRecovery(redis, timing)).recovering).toBe(false);
    await rotateIncarnation(redis);
    expect(await readRecovery(redis, timing)).toMatchObject({ recovering: true, shards: 256 });
  });
});
