// Section 6: Redis memory per key (MEMORY USAGE, all samples) of each key
// class after a few checks, per algorithm; the reference is a
// rate-limiter-flexible key on the same Redis.
import type { Algorithm, KeyPolicy } from "@geoquota/core";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { keyNames } from "@geoquota/redis";
import type { RedisServer } from "@geoquota/procs";
import type { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { BENCH_REGION, TIMING } from "./policies.js";

const ALGORITHMS: Algorithm[] = ["token_bucket", "gcra", "fixed_window", "sliding_window", "sliding_log"];
const CHECKS = 10;

export interface MemoryRow {
  readonly algorithm: Algorithm;
  /** Bytes by key class: P:b (bucket/window state), P:c (counters), P:z (sliding log). */
  readonly keys: Record<string, number>;
  readonly totalBytes: number;
  /** totalBytes ÷ the RLF key. */
  readonly vsRlf: number;
}

export interface MemoryResult {
  readonly checksPerKey: number;
  readonly rlfKeyBytes: number;
  readonly rows: MemoryRow[];
}

async function usage(redis: Redis, key: string): Promise<number> {
  return Number((await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")) ?? 0);
}

export async function benchMemory(server: RedisServer): Promise<MemoryResult> {
  const redis = server.client();
  await initFreshRegion(redis);
  const store = createRedisStore({ redis, region: BENCH_REGION, timing: TIMING });
  const rlf = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlfmem", points: 100, duration: 60 });
  for (let i = 0; i < CHECKS; i++) await rlf.consume("tenant_a", 1);
  const rlfKeyBytes = await usage(redis, "rlfmem:tenant_a");
  const rows: MemoryRow[] = [];
  for (const algorithm of ALGORITHMS) {
    const policy: KeyPolicy = {
      tenant: `mem_${algorithm}`,
      resource: "api",
      limit: { algorithm, capacity: 100, refillPerSecond: 100 / 60, windowMs: 60_000 },
      baseShare: 1_000_000,
      floorShare: 20_000,
    };
    for (let i = 0; i < CHECKS; i++) await store.check(policy, 1);
    const [b, c, , , z] = keyNames(policy.tenant, policy.resource);
    const keys: Record<string, number> = { "P:b": await usage(redis, b), "P:c": await usage(redis, c) };
    if (algorithm === "sliding_log") keys[`P:z (${CHECKS} entries)`] = await usage(redis, z);
    const totalBytes = Object.values(keys).reduce((a, x) => a + x, 0);
    rows.push({ algorithm, keys, totalBytes, vsRlf: rlfKeyBytes > 0 ? totalBytes / rlfKeyBytes : 0 });
  }
  await store.close();
  redis.disconnect();
  return { checksPerKey: CHECKS, rlfKeyBytes, rows };
}
