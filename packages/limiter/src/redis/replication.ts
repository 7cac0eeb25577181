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
import type { Redis } from "ioredis";
import { num, str } from "./decode.js";
import { MARKER_KEY, REPLID_KEY } from "./keys.js";
import { bindScripts } from "./scripts.js";

export interface ReplicationInfo {
  readonly replid: string;
  readonly connectedReplicas: number;
  readonly role: string;
}

export async function replicationInfo(redis: Redis): Promise<ReplicationInfo> {
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

export interface MarkerResult {
  readonly marker: string;
  readonly nowUs: number;
  /** True when the marker was rotated (recovery began) or a fresh marker was created. */
  readonly changed: boolean;
}

async function regionInit(redis: Redis, mode: string, replid: string): Promise<MarkerResult> {
  const r = await bindScripts(redis).call("regionInit", [MARKER_KEY, REPLID_KEY], [mode, replid]);
  return { marker: str(r[0], "marker"), nowUs: num(r[1], "now"), changed: num(r[2], "changed") === 1 };
}

/** The current marker, creating a new incarnation (born now: recovery) if missing. */
export function ensureIncarnation(redis: Redis): Promise<MarkerResult> {
  return regionInit(redis, "ensure", "");
}

/** Starts a new incarnation now: the region enters recovery (D + 2ε). */
export function rotateIncarnation(redis: Redis): Promise<MarkerResult> {
  return regionInit(redis, "rotate", "");
}

/**
 * For a cluster started from empty Redis servers that provably never held
 * geoquota state (the CLI `cluster` command): marker born at 0, so no recovery
 * and buckets start full. Does nothing (changed = false) if a marker exists.
 * Unsafe after any state loss: use `ensureIncarnation` then.
 */
export async function initFreshRegion(redis: Redis): Promise<MarkerResult> {
  const info = await replicationInfo(redis);
  return regionInit(redis, "fresh", info.replid);
}

/**
 * Compares the primary's `master_replid` with the one recorded in `gq:rid`
 * and rotates the marker on a change (a failover happened). Call it at start
 * and periodically (the check runs against the region's primary).
 */
export async function checkPrimary(redis: Redis): Promise<MarkerResult & { replid: string }> {
  const info = await replicationInfo(redis);
  const r = await regionInit(redis, "replid", info.replid);
  return { ...r, replid: info.replid };
}

/**
 * Waits until at least one replica acknowledged the writes made so far on
 * this connection, if the region has replicas (cached for `cacheMs`). Returns
 * whether the write is durable in that sense (true without replicas: nothing
 * to wait for, see the risk above).
 */
export function durabilityWaiter(redis: Redis, timeoutMs: number, cacheMs = 1000) {
  let replicas = 0;
  let checkedAt = Number.NEGATIVE_INFINITY;
  return async (): Promise<{ durable: boolean; replicas: number }> => {
    const t = performance.now();
    if (t - checkedAt > cacheMs) {
      replicas = (await replicationInfo(redis)).connectedReplicas;
      checkedAt = t;
    }
    if (replicas === 0) return { durable: true, replicas };
    const acked = Number(await redis.wait(1, timeoutMs));
    return { durable: acked >= 1, replicas };
  };
}
