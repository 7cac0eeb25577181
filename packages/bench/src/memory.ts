// Section 6: Redis memory per key (MEMORY USAGE, all samples) of each key class after a few
// checks, per algorithm; the reference is a rate-limiter-flexible key on the same Redis. Both name
// the same tenant and resource (MEMORY USAGE counts a key's name: a longer name can cost a larger
// allocation class), one algorithm after the other on the same names. Then what a token-bucket key
// grows to in a running region (its own counters large, a drain generation recorded, two other
// regions' counters merged in) and what an idle key costs until its TTL ends it.
import type { Algorithm, KeyPolicy } from "@geoquota/core";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { createGossipStore, keyNames, ttlMs } from "@geoquota/redis";
import type { RedisServer } from "@geoquota/procs";
import type { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { BENCH_REGION, TIMING } from "./policies.js";

const ALGORITHMS: Algorithm[] = ["token_bucket", "gcra", "fixed_window", "sliding_window", "sliding_log"];
const CHECKS = 10;
const TENANT = "tenant_a";
const RESOURCE = "api";

export interface MemoryRow {
  readonly algorithm: Algorithm;
  /** Bytes by key class: P:b (state and counters), P:z (sliding log). */
  readonly keys: Record<string, number>;
  readonly totalBytes: number;
  /** totalBytes ÷ the RLF key. */
  readonly vsRlf: number;
}

export interface MemoryResult {
  readonly checksPerKey: number;
  /** The names both sides use: tenant and resource (RLF: its key `rlf:<tenant>:<resource>`). */
  readonly names: string;
  readonly rlfKeyBytes: number;
  readonly rows: MemoryRow[];
  /**
   * A token-bucket key in a running region: 1,000,000 admitted and 1,000 denied of its own, a drain
   * generation recorded (a gossip drain ran) and a full refund record (CHECKS admissions since);
   * then with two other regions' counters merged in.
   */
  readonly runningTokenBucketBytes: number;
  readonly threeRegionsTokenBucketBytes: number;
  /** The same key's policy, for the idle figure: its TTL (ttl … 2·ttl after its last write). */
  readonly idleTtlSeconds: number;
  /** gq:{s<k>}:pv:<version> + its gq:pvn entry: once per policy version and shard, not per key. */
  readonly policyEntryBytes: number;
}

async function usage(redis: Redis, key: string): Promise<number> {
  return Number((await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")) ?? 0);
}

function policyOf(algorithm: Algorithm): KeyPolicy {
  return {
    tenant: TENANT,
    resource: RESOURCE,
    limit: { algorithm, capacity: 100, refillPerSecond: 100 / 60, windowMs: 60_000 },
    baseShare: 1_000_000,
    floorShare: 20_000,
  };
}

export async function benchMemory(server: RedisServer): Promise<MemoryResult> {
  const redis = server.client();
  await initFreshRegion(redis);
  const store = createRedisStore({ redis, region: BENCH_REGION, timing: TIMING });
  const rlf = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlf", points: 100, duration: 60 });
  for (let i = 0; i < CHECKS; i++) await rlf.consume(`${TENANT}:${RESOURCE}`, 1);
  const rlfKeyBytes = await usage(redis, `rlf:${TENANT}:${RESOURCE}`);
  const [b, , , , z] = keyNames(TENANT, RESOURCE) as [string, string, string, string, string];
  const rows: MemoryRow[] = [];
  for (const algorithm of ALGORITHMS) {
    await redis.del(b, z);
    const policy = policyOf(algorithm);
    for (let i = 0; i < CHECKS; i++) await store.check(policy, 1);
    const keys: Record<string, number> = { "P:b": await usage(redis, b) };
    if (algorithm === "sliding_log") keys[`P:z (${CHECKS} entries)`] = await usage(redis, z);
    const totalBytes = Object.values(keys).reduce((a, x) => a + x, 0);
    rows.push({ algorithm, keys, totalBytes, vsRlf: rlfKeyBytes > 0 ? totalBytes / rlfKeyBytes : 0 });
  }
  // A running region's token-bucket key.
  await redis.del(b, z);
  const policy = policyOf("token_bucket");
  const gossip = createGossipStore({ redis, region: BENCH_REGION, timing: TIMING });
  await store.check(policy, 1);
  await gossip.drainDirty(10_000);
  const own = (await gossip.readKeyState(policy)).counterFields;
  const mine = Object.keys(own).find((f) => f.startsWith("p|")) as string;
  const replica = mine.slice(2);
  await gossip.mergeRemote(policy, [], { [`p|${replica}`]: 1_000_000, [`d|${replica}`]: 1_000 });
  for (let i = 0; i < CHECKS; i++) await store.check(policy, 1);
  const runningTokenBucketBytes = await usage(redis, b);
  await gossip.mergeRemote(policy, [], {
    "p|eu-west.1733312345678901": 734_521,
    "d|eu-west.1733312345678901": 12_004,
    "p|ap-south.1733312345611111": 402_117,
  });
  const threeRegionsTokenBucketBytes = await usage(redis, b);
  // The shard's policy entries of the token bucket's version (any entry of the shard is its own size).
  const pv = (await redis.keys(`gq:{s*}:pv:token_bucket:*`))[0];
  const pvn = pv === undefined ? undefined : `${pv.slice(0, pv.indexOf("}") + 2)}pvn`;
  const policyEntryBytes =
    pv === undefined || pvn === undefined
      ? 0
      : (await usage(redis, pv)) + Math.round((await usage(redis, pvn)) / Math.max(1, await redis.hlen(pvn)));
  await store.close();
  redis.disconnect();
  return {
    checksPerKey: CHECKS,
    names: `${TENANT}/${RESOURCE}`,
    rlfKeyBytes,
    rows,
    runningTokenBucketBytes,
    threeRegionsTokenBucketBytes,
    idleTtlSeconds: ttlMs(policy, TIMING) / 1000,
    policyEntryBytes,
  };
}
