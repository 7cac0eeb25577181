// Builds the per-key KEYS shared by every per-key script (lua/lib/core.lua), cached per policy
// object: the shard's marker and drain generation, the key's hash P:b, and the key's policy
// version entry, whose name carries the policy (read_policy: the scripts take no policy arguments).
import { bucketVersion, type KeyLimit, type KeyPolicy, type Timing } from "@geoquota/core";
import { RedisStoreError } from "./errors.js";
import { assertName, drainGenKey, keyNames, markerKey, policyKey, shardOf } from "./keys.js";

/** The KEYS of every per-key script (specs.ts KEY_SCRIPT_KEYS), by name. */
export type ScriptKeys = readonly [inc: string, drainGen: string, bucket: string, policy: string];

/** check.lua's KEYS and ARGV but the cost (which each call appends: `checkCost`). */
export type CheckHead = readonly [...ScriptKeys, region: string];

export interface KeyArgs {
  /** gq:{s<k>}:inc, gq:{s<k>}:dg, P:b, gq:{s<k>}:pv:<version> (k = the tenant's shard) */
  readonly keys: ScriptKeys;
  /** The tenant's shard (keys.ts shardOf). */
  readonly shard: number;
  /** The key's names P:b, P:c (before issue 24), P:l, P:k, P:z (the scripts name all from P:b). */
  readonly itemKeys: readonly string[];
  readonly ttlMs: number;
}

export function keyLimit(policy: KeyPolicy): KeyLimit {
  const l = policy.limit;
  return {
    algorithm: l.algorithm,
    capacity: l.capacity,
    refillPerSecond: l.refillPerSecond,
    ...(l.windowMs !== undefined ? { windowMs: l.windowMs } : {}),
    baseShare: policy.baseShare,
    floorShare: policy.floorShare,
  };
}

const IDLE_TTL_WITHOUT_REFILL_MS = 24 * 3600 * 1000;

/**
 * TTL of P:b / P:c (DESIGN §4): ≥ full-refill time C/r + D + ε, so expiry
 * never forgets an outstanding loan's effect and a bucket recreated after
 * expiry would have been full anyway. We add 2ε more (a borrower's view of a
 * deadline may be 2ε late) and one second of slack. Window keys need two
 * windows (the sliding counter reads the previous one).
 */
export function ttlMs(policy: KeyPolicy, timing: Timing): number {
  const l = policy.limit;
  const lease = Math.ceil((timing.loanDurationUs + 3 * timing.epsilonUs) / 1000) + 1000;
  if (l.algorithm === "token_bucket" || l.algorithm === "gcra") {
    if (!(l.refillPerSecond > 0)) return IDLE_TTL_WITHOUT_REFILL_MS + lease;
    return Math.ceil((l.capacity / l.refillPerSecond) * 1000) + lease;
  }
  return 2 * windowMs(policy) + lease;
}

export function windowMs(policy: KeyPolicy): number {
  return policy.limit.windowMs ?? 1000;
}

/** A per-store builder: its cache is keyed by policy object, valid for one timing. */
export function keyArgsBuilder(timing: Timing): (policy: KeyPolicy) => KeyArgs {
  const cache = new WeakMap<KeyPolicy, KeyArgs>();
  return (policy) => keyArgs(policy, timing, cache);
}

/**
 * The policy version of a key as its registry entry's name carries it (lua/lib/core.lua
 * read_policy): the bucket fingerprint (@geoquota/core bucketVersion), the window µs, ε, D and the
 * TTL, `|`-separated. Numbers are JavaScript's shortest round-trip text, which Lua's tonumber reads
 * back to the same doubles.
 */
export function policyVersionOf(policy: KeyPolicy, timing: Timing): string {
  return [
    bucketVersion(keyLimit(policy), timing),
    windowMs(policy) * 1000,
    timing.epsilonUs,
    timing.loanDurationUs,
    ttlMs(policy, timing),
  ].join("|");
}

function keyArgs(policy: KeyPolicy, timing: Timing, cache: WeakMap<KeyPolicy, KeyArgs>): KeyArgs {
  const hit = cache.get(policy);
  if (hit) return hit;
  assertName("tenant", policy.tenant);
  assertName("resource", policy.resource);
  const l = policy.limit;
  if (!(l.capacity >= 0) || !(l.refillPerSecond >= 0) || !(windowMs(policy) > 0)) {
    throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `limit of ${policy.tenant}/${policy.resource}`);
  }
  const item = keyNames(policy.tenant, policy.resource);
  const shard = shardOf(policy.tenant);
  const out: KeyArgs = {
    keys: [markerKey(shard), drainGenKey(shard), item[0], policyKey(shard, policyVersionOf(policy, timing))],
    shard,
    itemKeys: item,
    ttlMs: ttlMs(policy, timing),
  };
  cache.set(policy, out);
  return out;
}

export function assertCost(cost: number): void {
  if (!Number.isFinite(cost) || cost < 0) throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `cost ${cost}`);
}

/** check.lua's head for one key: its KEYS and the region (joined once per policy). */
export function checkHead(a: KeyArgs, region: string): CheckHead {
  return [...a.keys, region];
}

/** check.lua's last argument (ARGV 2): a finite cost ≥ 0 (else GQ_ERR_BAD_ARGUMENT), as Lua reads it. */
export function checkCost(cost: number): string {
  assertCost(cost);
  return String(cost);
}
