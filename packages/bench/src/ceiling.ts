// The ceiling of the Redis path: bare ioredis calling a minimal token-bucket
// script by EVALSHA (defineCommand), nothing else on the client side.
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";

const SOURCE = readFileSync(new URL("../lua/token_bucket_min.lua", import.meta.url), "utf8");
const COMMAND = "benchBucketMin";

export type CeilingCheck = (key: string, capacity: number, refillPerSecond: number) => Promise<unknown>;

export function bindCeiling(redis: Redis): CeilingCheck {
  const target = redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>;
  if (typeof target[COMMAND] !== "function") redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: SOURCE });
  const fn = target[COMMAND]!;
  return (key, capacity, refillPerSecond) => fn.call(redis, key, capacity, refillPerSecond, 1);
}
