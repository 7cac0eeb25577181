// Key schema of docs/internals.md. Every key a script touches carries one
// hash tag `{s<k>}`, k = shardOf(tenant) ∈ [0, SHARDS): the tenant's keys and
// its shard's marker, change feed, drain generation and replid record all
// hash to one slot, so every script is Redis-Cluster safe.
import type { Cluster, Redis } from "ioredis";
import { RedisStoreError } from "./errors.js";
import { NAME_CHARS, NAME_PATTERN, parseQuotaKey, quotaKey } from "@geoquota/core";

/** A region's Redis: a standalone server (primary) or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

/**
 * Pub/sub channel on which a region's limiters wake its gossip daemon (RegionStore.wake): one per
 * region's Redis, nothing stored. In a Redis Cluster a PUBLISH reaches every node's subscribers.
 */
export const WAKE_CHANNEL = "gq:wake";

/** Number of shards (hash tags) the global keys are split into. Fixed: changing it moves every key. */
export const SHARDS = 256;

/**
 * The tenant's shard: FNV-1a 32-bit of the tenant's UTF-8 bytes (names are
 * ASCII, see assertName) modulo SHARDS. Stable across processes and versions.
 */
export function shardOf(tenant: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tenant.length; i++) {
    h ^= tenant.charCodeAt(i) & 0xff;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % SHARDS;
}

/** The hash tag of a shard, braces included. */
export function shardTag(shard: number): string {
  return `{s${shard}}`;
}

/** Incarnation marker of a shard (`<id>:<bornUs>`). */
export function markerKey(shard: number): string {
  return `gq:${shardTag(shard)}:inc`;
}
/** Primary's replication id the shard's marker belongs to. */
export function replidKey(shard: number): string {
  return `gq:${shardTag(shard)}:rid`;
}
/** Change feed of a shard (set of `tenant|resource`). */
export function dirtyKey(shard: number): string {
  return `gq:${shardTag(shard)}:dirty`;
}
/** The shard's change-feed drain generation (lua/drain_dirty.lua, lua/lib/keep.lua keep()). */
export function drainGenKey(shard: number): string {
  return `gq:${shardTag(shard)}:dg`;
}

/**
 * A key's policy version entry in its shard (lua/lib/core.lua read_policy): `version` is
 * args.ts policyVersionOf's text. The entries and their index gq:{s<k>}:pvn have no TTL: one per
 * policy version used in the shard.
 */
export function policyKey(shard: number, version: string): string {
  return `gq:${shardTag(shard)}:pv:${version}`;
}
/** The shard's index of policy versions by number (`#`: the last number). */
export function policyIndexKey(shard: number): string {
  return `gq:${shardTag(shard)}:pvn`;
}

/** 0 … SHARDS − 1. */
export const ALL_SHARDS: readonly number[] = Array.from({ length: SHARDS }, (_, i) => i);

export function assertName(kind: string, value: string): void {
  if (!NAME_PATTERN.test(value))
    throw new RedisStoreError("GQ_ERR_BAD_NAME", `${kind} ${JSON.stringify(value)}`);
}

/**
 * P:b, P:c, P:l, P:k, P:z of one (tenant, resource). P:b holds the key's state and counters; P:c
 * (the counters before issue 24) is read once by the scripts, which fold it into P:b.
 */
export function keyNames(tenant: string, resource: string): [string, string, string, string, string] {
  const p = `gq:${shardTag(shardOf(tenant))}:${tenant}:${resource}`;
  return [`${p}:b`, `${p}:c`, `${p}:l`, `${p}:k`, `${p}:z`];
}

const NAME_PART = `([${NAME_CHARS}]{1,128})`;
const KEY_HASH = new RegExp(`^gq:\\{s(\\d{1,3})\\}:${NAME_PART}:${NAME_PART}:[bc]$`);

/**
 * `gq:{s<k>}:<tenant>:<resource>:b` (the key's hash, its counters inside) or `…:c` (its counters
 * before issue 24) → tenant and resource, or undefined for another key.
 */
export function parseKeyName(name: string): { tenant: string; resource: string } | undefined {
  const m = KEY_HASH.exec(name);
  if (!m || shardOf(m[2] as string) !== Number(m[1])) return undefined;
  return { tenant: m[2] as string, resource: m[3] as string };
}

/** The change-feed member of a key. */
export function dirtyMember(tenant: string, resource: string): string {
  return quotaKey(tenant, resource);
}

/** Inverse of dirtyMember (a member without `|`, never written, reads as a tenant with an empty resource). */
export function parseDirtyMember(member: string): { tenant: string; resource: string } {
  return parseQuotaKey(member) ?? { tenant: member, resource: "" };
}

const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** Redis Cluster hash slot of a shard's keys (CRC16/XMODEM of `s<k>` mod 16384). */
export function shardSlot(shard: number): number {
  return crc16Slot(`s${shard}`);
}

/**
 * The hash tag of `key` as Redis Cluster reads it: the text between the first
 * `{` and the next `}` when not empty, else the whole key.
 */
export function hashTagOf(key: string): string {
  const open = key.indexOf("{");
  if (open >= 0) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) return key.slice(open + 1, close);
  }
  return key;
}

/** Redis Cluster hash slot of any key. */
export function keySlot(key: string): number {
  return crc16Slot(hashTagOf(key));
}

function crc16Slot(tag: string): number {
  let crc = 0;
  for (let i = 0; i < tag.length; i++) {
    crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ tag.charCodeAt(i)) & 0xff] as number);
  }
  return crc % 16384;
}

/** P:f of one (tenant, resource): refund receipts already used (lua/refund.lua). */
export function refundedReceiptsKey(tenant: string, resource: string): string {
  return `gq:${shardTag(shardOf(tenant))}:${tenant}:${resource}:f`;
}
