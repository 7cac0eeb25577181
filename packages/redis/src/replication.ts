// Failover safety (DESIGN §4). A replica promoted after a failover may lack
// the primary's last writes (loans granted, returns recorded) although the
// incarnation marker survived. Three defences:
// - loan grants and returns leave the region only once a durability
//   certificate covers them (certificate.ts: a probe write, then `WAIT` on the
//   connection that carried the write, with no reconnect in between, acked by
//   every configured and every connected replica); a region whose replicas
//   are configured but disconnected is not durable;
// - a change of the primary's replication id (`master_replid`) rotates the
//   marker: the region enters recovery exactly as after a lost marker. Every
//   process that writes bucket or loan state (limiter and daemon) polls it
//   every `redis.primaryCheckMs` (`createPrimaryWatcher`): the detection window;
// - `checkRedisSetup` refuses, at start, an evicting `maxmemory-policy` (an
//   evicted loan record is a forgotten reservation while the marker survives)
//   and more connected replicas than `redis.replicas` (WAIT would not cover
//   them); the primary watcher re-checks both on every tick (a `CONFIG SET`
//   or a replica attached later is drift: recovery and/or fail closed).
// A region WITHOUT replicas (`redis.replicas: 0`) has no durability wait: a
// restart without persistence loses the marker (→ recovery, safe), but a
// restart WITH persistence (RDB/AOF) can come back with an old snapshot and
// the old marker: loans granted after the snapshot are forgotten and their
// units can be lent or used twice until they lapse (≤ D + ε). Run regions
// with a replica, or with `appendfsync always`.
//
// Shards: every shard k has its own marker gq:{s<k>}:inc and replid record
// gq:{s<k>}:rid (keys.ts). A missing shard marker means that shard's state
// was lost (in a Redis Cluster: one node's slots) and only that shard
// recovers. On a Cluster each shard is compared with the replication id of
// the master node that serves its slot. Functions below touch every shard
// with one script call per shard (never MULTI or a cross-slot pipeline).
import type { Redis } from "ioredis";
import { RedisStoreError } from "./errors.js";
import { ALL_SHARDS, isCluster, markerKey, type RedisClient, replidKey, shardSlot } from "./keys.js";
import { bindScripts } from "./scripts.js";
import { regionInitArgs } from "./script-args.js";

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
  return bindScripts(redis).run(
    "regionInit",
    regionInitArgs(markerKey(shard), replidKey(shard), mode, replid, freshId),
  );
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

/** A start-time assumption of DESIGN §4 that a master no longer meets. */
export type SetupSetting = "maxmemory-policy" | "replicas";
export const SETUP_SETTINGS: readonly SetupSetting[] = ["maxmemory-policy", "replicas"];

export interface SetupProblem {
  readonly setting: SetupSetting;
  /** `host:port` of the master. */
  readonly node: string;
  /** One sentence naming the setting, its value and the fix. */
  readonly detail: string;
}

/**
 * What one master breaks of DESIGN §4's setup: an evicting `maxmemory-policy`
 * with a `maxmemory` set (eviction can drop a bucket or a loan book while the
 * incarnation marker survives), or more connected replicas than
 * `redis.replicas` (the durability wait would not cover them, and a failover
 * could promote one that missed a write). `replicas` undefined: not checked.
 */
async function nodeProblems(node: Redis, replicas: number | undefined): Promise<SetupProblem[]> {
  const where = `${node.options.host}:${node.options.port}`;
  const out: SetupProblem[] = [];
  const memory = await node.info("memory");
  const maxmemory = Number(infoField(memory, "maxmemory") || "0");
  const policy = infoField(memory, "maxmemory_policy");
  if (maxmemory > 0 && policy !== "noeviction") {
    out.push({
      setting: "maxmemory-policy",
      node: where,
      detail:
        `${where} has maxmemory-policy ${policy} with maxmemory ${maxmemory}: eviction can forget a bucket or a ` +
        "loan reservation while the incarnation marker survives; set maxmemory-policy noeviction (or maxmemory 0)",
    });
  }
  if (replicas !== undefined) {
    const connected = (await replicationInfo(node)).connectedReplicas;
    if (connected > replicas) {
      out.push({
        setting: "replicas",
        node: where,
        detail:
          `${where} has ${connected} connected replicas but redis.replicas is ${replicas}: writes would be ` +
          "answered before a replica that may be promoted has them; detach it or set redis.replicas to " +
          `${connected}`,
      });
    }
  }
  return out;
}

function masterNodes(redis: RedisClient): Redis[] {
  const nodes: Redis[] = isCluster(redis) ? redis.nodes("master") : [redis];
  if (nodes.length === 0)
    throw new Error("no Redis Cluster master known yet: check the setup once the client is ready");
  return nodes;
}

/** Every master's setup problems (`checkRedisSetup` throws the first; the watcher reports them all). */
export async function redisSetupProblems(
  redis: RedisClient,
  options: { replicas?: number },
): Promise<SetupProblem[]> {
  const all = await Promise.all(masterNodes(redis).map((n) => nodeProblems(n, options.replicas)));
  return all.flat();
}

/** A setting that started or stopped drifting (the watcher calls `onDrift` once per change). */
export interface SetupDriftChange {
  readonly setting: SetupSetting;
  /** True: the setting is now unsafe on some master (`detail` says which); false: safe again everywhere. */
  readonly drifting: boolean;
  readonly detail: string;
  /** Shards whose marker this change rotated (eviction: on both edges). */
  readonly rotatedShards: number;
}

export interface PrimaryWatcherOptions {
  /**
   * `redis.replicas`: a master with more connected replicas is drift. Absent:
   * the replica count is not watched (only for tools that write no state).
   */
  readonly replicas?: number;
  /** Called on each change of a setting's drift (not on every tick): log it, count it. */
  readonly onDrift?: (change: SetupDriftChange) => void;
}

export interface PrimaryCheck {
  readonly changedShards: number;
  readonly replid: string;
  /** Settings unsafe at this check (empty: none). */
  readonly drift: readonly SetupProblem[];
}

/**
 * Watches the primaries for one process (limiter or daemon), DESIGN §4
 * "Checked continuously". Each `check()`:
 * - reads `INFO replication` of every master (one call per node) and runs the
 *   `replid` check of `region_init` only for shards whose replid differs from
 *   the one this watcher saw at its last complete check (all shards on the
 *   first call): the common case costs one INFO per node and no script.
 *   Concurrent watchers (limiter, daemon) agree through `gq:rid`: the first
 *   one to run the script rotates, the others find the new replid recorded;
 * - re-checks what `checkRedisSetup` checked at start (one more INFO per
 *   node): an evicting policy and extra connected replicas are drift.
 *   `drifting()` names the unsafe settings until a check finds them safe; the
 *   caller refuses admissions, leases, grants and early returns meanwhile
 *   (fails closed). Eviction may already have dropped a bucket or a loan
 *   book, so an evicting policy also rotates every marker when first seen
 *   (recovery) and again when the policy is safe again (what was evicted in
 *   between is forgotten state too; the recovery runs from then). An extra
 *   replica rotates nothing: it lacks writes only if promoted, and a
 *   promotion changes the replid.
 * The window between ticks (`redis.primaryCheckMs`) is not covered.
 */
export interface PrimaryWatcher {
  check(): Promise<PrimaryCheck>;
  /** The settings found unsafe by the last completed check (an error leaves the last answer). */
  drifting(): readonly SetupSetting[];
  /** Runs `check()` now and then every `everyMs` (never overlapping) until `stop()`. */
  start(everyMs: number, onError?: (err: unknown) => void): void;
  stop(): void;
}

export function createPrimaryWatcher(
  redis: RedisClient,
  options: PrimaryWatcherOptions = {},
): PrimaryWatcher {
  let seen: readonly string[] | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  const drifting = new Set<SetupSetting>();
  const replids = async () => {
    const ids = await shardReplids(redis);
    const last = seen;
    const shards = ALL_SHARDS.filter((k) => last === undefined || last[k] !== ids[k]);
    let changedShards = 0;
    if (shards.length > 0) {
      const r = await Promise.all(shards.map((k) => regionInit(redis, k, "replid", ids[k] ?? "")));
      changedShards = r.filter((x) => x.changed).length;
    }
    seen = ids;
    return { changedShards, replid: ids[0] ?? "" };
  };
  // An eviction edge whose rotation failed (Redis unreachable): retried on every tick until done.
  let rotationOwed = false;
  const setup = async () => {
    const problems = await redisSetupProblems(redis, options);
    const now = new Set(problems.map((p) => p.setting));
    if (rotationOwed) {
      await rotateIncarnation(redis);
      rotationOwed = false;
    }
    for (const setting of SETUP_SETTINGS) {
      const was = drifting.has(setting);
      const is = now.has(setting);
      if (was === is) continue;
      // Fail closed before the rotation, reopen only after it: a failed
      // rotation never leaves admissions open on evicted state.
      if (is) drifting.add(setting);
      let rotatedShards = 0;
      if (setting === "maxmemory-policy") {
        rotationOwed = true;
        rotatedShards = (await rotateIncarnation(redis)).changedShards;
        rotationOwed = false;
      }
      if (!is) drifting.delete(setting);
      const detail = is
        ? problems
            .filter((p) => p.setting === setting)
            .map((p) => p.detail)
            .join("; ")
        : `${setting} is safe again on every master`;
      options.onDrift?.({ setting, drifting: is, detail, rotatedShards });
    }
    return problems;
  };
  const check = async (): Promise<PrimaryCheck> => {
    const r = await replids();
    const drift = await setup();
    return { ...r, drift };
  };
  return {
    check,
    drifting: () => [...drifting],
    start(everyMs, onError) {
      if (running) return;
      running = true;
      const tick = () => {
        check()
          .catch((err: unknown) => onError?.(err))
          .finally(() => {
            if (!running) return;
            timer = setTimeout(tick, everyMs);
            timer.unref();
          });
      };
      tick();
    },
    stop() {
      running = false;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}

function infoField(text: string, name: string): string {
  const m = new RegExp(`^${name}:(.*)$`, "m").exec(text);
  return m?.[1]?.trim() ?? "";
}

/**
 * Start-time check of every master serving the region (DESIGN §4): an
 * evicting `maxmemory-policy` with a `maxmemory` set is refused, and so is a
 * master with more connected replicas than `redis.replicas`. Throws
 * `GQ_ERR_REDIS_SETUP` naming the setting (the first problem found). The
 * primary watcher re-checks both on every tick (drift).
 */
export async function checkRedisSetup(redis: RedisClient, options: { replicas: number }): Promise<void> {
  for (const node of masterNodes(redis)) {
    const first = (await nodeProblems(node, options.replicas))[0];
    if (first !== undefined)
      throw new RedisStoreError("GQ_ERR_REDIS_SETUP", `${first.setting}: ${first.detail}`);
  }
}

/**
 * Every shard's marker: one MGET on a standalone server; on a Cluster one
 * pipeline per master over its own connection (a node connection may mix
 * slots it serves, the cluster client's pipeline may not).
 */
async function readMarkers(redis: RedisClient): Promise<(string | null)[]> {
  if (!isCluster(redis)) return redis.mget(ALL_SHARDS.map(markerKey));
  const byNode = new Map<Redis, number[]>();
  for (const k of ALL_SHARDS) {
    const node = shardNode(redis, k);
    const list = byNode.get(node);
    if (list === undefined) byNode.set(node, [k]);
    else list.push(k);
  }
  const out: (string | null)[] = ALL_SHARDS.map(() => null);
  await Promise.all(
    [...byNode].map(async ([node, shards]) => {
      const p = node.pipeline();
      for (const k of shards) p.get(markerKey(k));
      const replies = (await p.exec()) ?? [];
      for (const [i, k] of shards.entries()) {
        const [err, value] = replies[i] ?? [new Error("no reply"), null];
        if (err) throw err;
        out[k] = (value as string | null) ?? null;
      }
    }),
  );
  return out;
}

/**
 * Every shard's incarnation marker (null: not created yet) and the Redis
 * time, read-only (the daemon's recovery watch: a shard is in recovery while
 * its marker is younger than D + 2ε).
 */
export async function readShardMarkers(
  redis: RedisClient,
): Promise<{ markers: (string | null)[]; nowUs: number }> {
  const [sec, usec] = await shardNode(redis, 0).time();
  const nowUs = Number(sec) * 1_000_000 + Number(usec);
  return { markers: await readMarkers(redis), nowUs };
}
