// Failover safety (DESIGN §4). A replica promoted after a failover may lack
// the primary's last writes (loans granted, returns recorded) although the
// incarnation marker survived. Two defences:
// - loan grants and returns are made durable with `WAIT 1 <timeout>` before
//   they leave the region, when the region has replicas;
// - a change of the primary's replication id (`master_replid`) rotates the
//   marker: the region enters recovery exactly as after a lost marker.
// A region WITHOUT replicas has neither: a restart without persistence loses
// the marker (→ recovery, safe), but a restart WITH persistence (RDB/AOF) can
// come back with an old snapshot and the old marker: loans granted after the
// snapshot are forgotten and their units can be lent or used twice until they
// lapse (≤ D + ε). Run regions with a replica, or with `appendfsync always`.
//
// Shards: every shard k has its own marker gq:{s<k>}:inc and replid record
// gq:{s<k>}:rid (keys.ts). A missing shard marker means that shard's state
// was lost (in a Redis Cluster: one node's slots) and only that shard
// recovers. On a Cluster each shard is compared with the replication id of
// the master node that serves its slot. Functions below touch every shard
// with one script call per shard (never MULTI or a cross-slot pipeline).
import type { Redis } from "ioredis";
import { num, str } from "./decode.js";
import { ALL_SHARDS, isCluster, markerKey, type RedisClient, replidKey, shardSlot } from "./keys.js";
import { bindScripts } from "./scripts.js";

export interface ReplicationInfo {
  readonly replid: string;
  readonly connectedReplicas: number;
  readonly role: string;
}

/** INFO replication of a standalone server, or of a random node of a Cluster (use a node for a Cluster). */
export async function replicationInfo(redis: RedisClient): Promise<ReplicationInfo> {
  const text = await redis.info("replication");
  const field = (name: string) => {
    const m = new RegExp(`^${name}:(.*)$`, "m").exec(text);
    return m?.[1]?.trim() ?? "";
  };
  return {
    replid: field("master_replid"),
    connectedReplicas: Number(field("connected_slaves") || "0"),
    role: field("role"),
  };
}

/** The connection serving a shard's slot: the client itself when standalone, the slot's master on a Cluster. */
export function shardNode(redis: RedisClient, shard: number): Redis {
  if (!isCluster(redis)) return redis;
  const slot = shardSlot(shard);
  const owner = redis.slots[slot]?.[0];
  const masters = redis.nodes("master");
  const node = masters.find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node) throw new Error(`no master known for slot ${slot} (shard ${shard}); is the cluster up?`);
  return node;
}

export interface MarkerResult {
  /** The marker of shard `shard` (0 unless asked for a tenant's shard). */
  readonly marker: string;
  readonly nowUs: number;
  /** True when a marker was rotated (recovery began) or a fresh marker was created (any shard). */
  readonly changed: boolean;
  /** Shards whose marker changed. */
  readonly changedShards: number;
  /** The shard `marker` belongs to. */
  readonly shard: number;
}

interface ShardResult {
  readonly marker: string;
  readonly nowUs: number;
  readonly changed: boolean;
}

async function regionInit(
  redis: RedisClient,
  shard: number,
  mode: string,
  replid: string,
  freshId = "",
): Promise<ShardResult> {
  const r = await bindScripts(redis).call(
    "regionInit",
    [markerKey(shard), replidKey(shard)],
    [mode, replid, freshId],
  );
  return { marker: str(r[0], "marker"), nowUs: num(r[1], "now"), changed: num(r[2], "changed") === 1 };
}

async function everyShard(
  run: (shard: number) => Promise<ShardResult>,
  shards: readonly number[] = ALL_SHARDS,
): Promise<MarkerResult> {
  const all = await Promise.all(shards.map(run));
  const first = all[0] as ShardResult;
  return {
    marker: first.marker,
    nowUs: first.nowUs,
    changed: all.some((r) => r.changed),
    changedShards: all.filter((r) => r.changed).length,
    shard: shards[0] as number,
  };
}

/** The marker of `shard` (default 0), creating a new incarnation (born now: recovery) if missing. */
export async function ensureIncarnation(redis: RedisClient, shard = 0): Promise<MarkerResult> {
  const r = await regionInit(redis, shard, "ensure", "");
  return { ...r, changedShards: r.changed ? 1 : 0, shard };
}

/** Starts a new incarnation now on every shard: the region enters recovery (D + 2ε). */
export function rotateIncarnation(redis: RedisClient): Promise<MarkerResult> {
  return everyShard((k) => regionInit(redis, k, "rotate", ""));
}

/** The master_replid of the node serving each shard (one INFO per node). */
async function shardReplids(redis: RedisClient): Promise<string[]> {
  if (!isCluster(redis)) {
    const id = (await replicationInfo(redis)).replid;
    return ALL_SHARDS.map(() => id);
  }
  const byNode = new Map<Redis, Promise<ReplicationInfo>>();
  const nodes = ALL_SHARDS.map((k) => shardNode(redis, k));
  for (const n of nodes) if (!byNode.has(n)) byNode.set(n, replicationInfo(n));
  return Promise.all(nodes.map(async (n) => (await byNode.get(n))?.replid ?? ""));
}

/**
 * For a cluster started from empty Redis servers that provably never held
 * geoquota state (the CLI `cluster` command): every shard gets one marker born
 * at 0, so no recovery and buckets start full. If any shard already has a
 * marker the region is not fresh: nothing is created fresh, and shards
 * without a marker get a new incarnation born now (recovery) instead.
 * Unsafe after any state loss: use `ensureIncarnation` then.
 */
export async function initFreshRegion(redis: RedisClient): Promise<MarkerResult> {
  const existing = await Promise.all(ALL_SHARDS.map((k) => shardNode(redis, k).exists(markerKey(k))));
  const replids = await shardReplids(redis);
  if (existing.some((n) => n > 0)) {
    return everyShard((k) => regionInit(redis, k, "ensure", ""));
  }
  const [sec, usec] = await shardNode(redis, 0).time();
  const nowUs = Number(sec) * 1_000_000 + Number(usec);
  const id = String(nowUs);
  return everyShard((k) => regionInit(redis, k, "fresh", replids[k] ?? "", id));
}

/**
 * Compares each shard's primary `master_replid` with the one recorded in the
 * shard's `gq:{s<k>}:rid` and rotates that shard's marker on a change (a
 * failover happened). Call it at start and periodically.
 */
export async function checkPrimary(redis: RedisClient): Promise<MarkerResult & { replid: string }> {
  const replids = await shardReplids(redis);
  const r = await everyShard((k) => regionInit(redis, k, "replid", replids[k] ?? ""));
  return { ...r, replid: replids[0] ?? "" };
}

/**
 * Waits until at least one replica acknowledged the writes made so far on
 * the connection serving `shard` (on a Cluster: the slot's master; ioredis
 * keeps one connection per node, so it is the one the script ran on), if
 * that node has replicas (cached for `cacheMs`). Returns whether the write is
 * durable in that sense (true without replicas: nothing to wait for).
 */
export function durabilityWaiter(redis: RedisClient, timeoutMs: number, cacheMs = 1000) {
  const cache = new Map<Redis, { replicas: number; checkedAt: number }>();
  return async (shard = 0): Promise<{ durable: boolean; replicas: number }> => {
    const node = shardNode(redis, shard);
    const t = performance.now();
    let c = cache.get(node);
    if (!c || t - c.checkedAt > cacheMs) {
      c = { replicas: (await replicationInfo(node)).connectedReplicas, checkedAt: t };
      cache.set(node, c);
    }
    if (c.replicas === 0) return { durable: true, replicas: 0 };
    const acked = Number(await node.wait(1, timeoutMs));
    return { durable: acked >= 1, replicas: c.replicas };
  };
}
