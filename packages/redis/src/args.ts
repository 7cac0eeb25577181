// Builds the per-key KEYS and the policy part of ARGV shared by every per-key
// script (lua/lib/core.lua read_policy), cached per policy object.
import { bucketVersion, type KeyLimit, type KeyPolicy, type Timing } from "@geoquota/core";
import { RedisStoreError } from "./errors.js";
import { assertName, dirtyKey, dirtyMember, drainGenKey, keyNames, markerKey, shardOf } from "./keys.js";

/** The KEYS of every per-key script (specs.ts KEY_SCRIPT_KEYS), by name. */
export type ScriptKeys = readonly [
  inc: string,
  dirty: string,
  bucket: string,
  counters: string,
  loans: string,
  leases: string,
  log: string,
  drainGen: string,
];

/** ARGV 2..12 of every per-key script (specs.ts POLICY_ARGV, lua/lib/core.lua read_policy), typed. */
export type PolicyArgv = readonly [
  algorithm: string,
  capacity: string,
  refillPerSecond: string,
  windowUs: number,
  baseShare: number,
  floorShare: number,
  policyVersion: string,
  epsilonUs: number,
  loanDurationUs: number,
  ttlMs: number,
  dirtyMember: string,
];

/** check.lua's KEYS and ARGV but the cost (which each call appends: `checkCost`). */
export type CheckHead = readonly [...ScriptKeys, region: string, ...PolicyArgv];

export interface KeyArgs {
  /** gq:{s<k>}:inc, gq:{s<k>}:dirty, P:b, P:c, P:l, P:k, P:z, gq:{s<k>}:dg (k = the tenant's shard) */
  readonly keys: ScriptKeys;
  /** The tenant's shard (keys.ts shardOf). */
  readonly shard: number;
  /** The five per-key names (compound check). */
  readonly itemKeys: readonly string[];
  /** ARGV 2..12 (after the region). */
  readonly policyArgv: PolicyArgv;
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
  const ttl = ttlMs(policy, timing);
  const [bucket, counters, loans, leases, log] = item;
  const out: KeyArgs = {
    keys: [markerKey(shard), dirtyKey(shard), bucket, counters, loans, leases, log, drainGenKey(shard)],
    shard,
    itemKeys: item,
    policyArgv: [
      l.algorithm,
      String(l.capacity),
      String(l.refillPerSecond),
      windowMs(policy) * 1000,
      policy.baseShare,
      policy.floorShare,
      bucketVersion(keyLimit(policy), timing),
      timing.epsilonUs,
      timing.loanDurationUs,
      ttl,
      dirtyMember(policy.tenant, policy.resource),
    ],
    ttlMs: ttl,
  };
  cache.set(policy, out);
  return out;
}

export function assertCost(cost: number): void {
  if (!Number.isFinite(cost) || cost < 0) throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `cost ${cost}`);
}

/** check.lua's head for one key: its KEYS, the region, the policy ARGV (joined once per policy). */
export function checkHead(a: KeyArgs, region: string): CheckHead {
  return [...a.keys, region, ...a.policyArgv];
}

/** check.lua's last argument (ARGV 13): a finite cost ≥ 0 (else GQ_ERR_BAD_ARGUMENT), as Lua reads it. */
export function checkCost(cost: number): string {
  assertCost(cost);
  return String(cost);
}
