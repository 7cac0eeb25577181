// Shared fixtures of the redis-*.int tests: the store fixtures of the test kit
// (a policy on a fresh tenant, the timing, receipt references, sleep; the limiter's
// tests import them from there too) and a Redis per file with a fresh region on it.
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import type { Redis } from "ioredis";
import { redisPerFile, TIMING } from "@geoquota/testkit";

export { policy, receiptRef, sleep, TIMING } from "@geoquota/testkit";

/**
 * One redis-server for the test file with a fresh region on it (marker born
 * at 0) and the Redis store of region "eu": `fx.redis`, `fx.setup.store`,
 * `fx.setup.marker`.
 */
export function freshRegionPerFile() {
  return redisPerFile(async (redis) => ({
    marker: (await initFreshRegion(redis)).marker,
    store: createRedisStore({ redis, region: "eu", timing: TIMING }),
  }));
}

/** P:b's record `c` (lua/lib/keep.lua): incarnation tag, own counters, bookkeeping. */
export interface KeyRecord {
  readonly tag: number | string;
  readonly p: number;
  readonly n: number;
  readonly d: number;
  /** Second (floored) of the last TTL refresh and SADD; false: none yet. */
  readonly bk: number | false;
  /** Drain generation at the last SADD; false: none yet. */
  readonly dg: number | false;
}

// Decoded and re-encoded by Redis's own cmsgpack (the scripts' encoding), numbers as %.17g.
const READ_RECORD = `
local c = redis.call('HGET', KEYS[1], 'c')
if not c then return false end
local out = {}
for _, x in ipairs({ cmsgpack.unpack(c) }) do
  if type(x) == 'number' then out[#out + 1] = string.format('%.17g', x) else out[#out + 1] = tostring(x) end
end
return out`;
const SET_BOOKKEEPING = `
local T, p, n, d = cmsgpack.unpack(redis.call('HGET', KEYS[1], 'c'))
redis.call('HSET', KEYS[1], 'c', cmsgpack.pack(T, p, n, d, tonumber(ARGV[1]), tonumber(ARGV[2])))`;

export async function readRecord(redis: Redis, bucketKey: string): Promise<KeyRecord | null> {
  const r = (await redis.eval(READ_RECORD, 1, bucketKey)) as string[] | null;
  if (r === null) return null;
  const num = (x: string | undefined): number | false =>
    x === undefined || x === "false" ? false : Number(x);
  const tag = Number.isNaN(Number(r[0])) ? (r[0] as string) : Number(r[0]);
  return { tag, p: Number(r[1]), n: Number(r[2]), d: Number(r[3]), bk: num(r[4]), dg: num(r[5]) };
}

/** Rewrites the record's bookkeeping (as if the last TTL refresh / SADD had been at `bk` s, gen `dg`). */
export async function setBookkeeping(redis: Redis, bucketKey: string, bk: number, dg: number): Promise<void> {
  await redis.eval(SET_BOOKKEEPING, 1, bucketKey, bk, dg);
}
