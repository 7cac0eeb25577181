// Watches whether this region is in recovery (DESIGN §4): some shard's
// incarnation marker `<id>:<bornUs>` is younger than D + 2ε by the region's
// Redis clock. Drives the `geoquota_region_recovering` gauge and the
// recovery_started / recovery_ended log events. Read-only: markers are made
// and rotated by the scripts and by checkPrimary.
import { ALL_SHARDS, isCluster, markerKey, type RedisClient, shardNode } from "@geoquota/redis";
import type { Redis } from "ioredis";

export interface RecoveryState {
  readonly recovering: boolean;
  /** Shards in recovery now. */
  readonly shards: number;
  /** Redis time (µs) when the last shard leaves recovery; 0 when not recovering. */
  readonly untilUs: number;
}

export function recoveryOf(
  markers: readonly (string | null)[],
  nowUs: number,
  timing: { loanDurationMs: number; epsilonMs: number },
): RecoveryState {
  const spanUs = (timing.loanDurationMs + 2 * timing.epsilonMs) * 1000;
  let shards = 0;
  let untilUs = 0;
  for (const m of markers) {
    if (m === null) continue; // not created yet: the first script to touch the shard makes it
    const born = Number(m.slice(m.indexOf(":") + 1));
    if (!Number.isFinite(born)) continue;
    const end = born + spanUs;
    if (nowUs < end) {
      shards++;
      untilUs = Math.max(untilUs, end);
    }
  }
  return { recovering: shards > 0, shards, untilUs };
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

/** Reads every shard's marker and the Redis time. */
export async function readRecovery(
  redis: RedisClient,
  timing: { loanDurationMs: number; epsilonMs: number },
): Promise<RecoveryState> {
  const [sec, usec] = await shardNode(redis, 0).time();
  const nowUs = Number(sec) * 1_000_000 + Number(usec);
  return recoveryOf(await readMarkers(redis), nowUs, timing);
}

export interface RecoveryWatch {
  /** One check now (also run every interval). */
  poll(): Promise<RecoveryState>;
  stop(): void;
}

/** Polls every `intervalMs`; calls `onChange` on each transition (and once for the first reading). */
export function watchRecovery(
  redis: RedisClient,
  timing: { loanDurationMs: number; epsilonMs: number },
  intervalMs: number,
  onChange: (now: RecoveryState, before: RecoveryState | undefined) => void,
  onError: (err: unknown) => void,
): RecoveryWatch {
  let last: RecoveryState | undefined;
  let inFlight: Promise<RecoveryState> | undefined;
  const poll = (): Promise<RecoveryState> => {
    inFlight ??= readRecovery(redis, timing)
      .then((s) => {
        if (last === undefined || last.recovering !== s.recovering) onChange(s, last);
        last = s;
        return s;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
  const timer = setInterval(() => {
    poll().catch(onError);
  }, intervalMs);
  timer.unref();
  return {
    poll,
    stop: () => clearInterval(timer),
  };
}
