// The stream scenario's moving parts (issue 9): per region an example stream
// server (@geoquota/stream, leases from that region's own Redis) and a flood
// client of the same tenant writing at a multiple of the tenant's byte rate.
// Every admitted frame is recorded server-side as [read, delivered] on the
// demo's clock, for the exact oracle. The cluster must run with a policies
// file that has the stream_* entries too: `mergePolicyFiles` writes one.
import type { Timing } from "@geoquota/core";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lookupPolicy, type PolicySet } from "@geoquota/config";
import { connectRegionRedis, createRedisStore } from "@geoquota/limiter";
import { type ExampleServer, runFloodClient, startExampleServer } from "@geoquota/stream";

export const STREAM_RESOURCE = "stream_bytes";

interface PoliciesJson {
  default: unknown;
  policies: Array<{ tenant: string; resource: string } & Record<string, unknown>>;
}

/**
 * Writes `base` plus every entry of `extra` whose (tenant, resource) `base`
 * lacks (base's default wins) into a new temp dir; `cleanup` removes it.
 */
export function mergePolicyFiles(base: string, extra: string): { path: string; cleanup(): void } {
  const a = JSON.parse(readFileSync(base, "utf8")) as PoliciesJson;
  const b = JSON.parse(readFileSync(extra, "utf8")) as PoliciesJson;
  const have = new Set(a.policies.map((p) => `${p.tenant}|${p.resource}`));
  const merged: PoliciesJson = {
    default: a.default,
    policies: [...a.policies, ...b.policies.filter((p) => !have.has(`${p.tenant}|${p.resource}`))],
  };
  const dir = mkdtempSync(join(tmpdir(), "geoquota-demo-policies-"));
  const path = join(dir, "policies.json");
  writeFileSync(path, `${JSON.stringify(merged, null, 2)}\n`);
  return { path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One admitted frame: read from the socket at sentMs, delivered at answeredMs (demo clock). */
export interface StreamRecord {
  readonly region: number;
  readonly sentMs: number;
  readonly answeredMs: number;
  readonly bytes: number;
}

export interface StreamRegionStats {
  readonly id: string;
  readonly connections: number;
  /** Connections whose socket is not being read now (waiting for tokens). */
  readonly paused: number;
  /** What the region's flood client holds back in ws (its writes stalled), bytes. */
  readonly clientBufferedBytes: number;
  readonly clientSentBytes: number;
}

export interface StreamRig {
  readonly tenant: string;
  readonly resource: string;
  /** The tenant's global byte limit (C bytes, r bytes/s). */
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  /** Each client's target send rate, bytes/s (multiple × r). */
  readonly offeredPerClient: number;
  readonly multiple: number;
  readonly regionIds: readonly string[];
  /** Admitted frames in delivery order (appended as they happen). */
  readonly records: readonly StreamRecord[];
  /** Starts one flood client per region for `durationMs` (returns at once). */
  startClients(durationMs: number): void;
  stats(): StreamRegionStats[];
  /** Client failures (connect errors…), as text; empty when none. */
  readonly errors: readonly string[];
  /** Stops the clients, then the servers (leases returned), then the Redis connections. Idempotent. */
  stop(): Promise<void>;
}

export interface StreamRigOptions {
  readonly regions: ReadonlyArray<{ readonly id: string; readonly redis: string }>;
  /** The merged policies (stream_* entries included), parsed for these region ids. */
  readonly policies: PolicySet;
  readonly tenant: string;
  /** The demo's time origin on performance.now() (the stream limiter's clock). */
  readonly originMs: number;
  /** Each client writes at multiple × the tenant's byte rate (default 10). */
  readonly multiple?: number;
  readonly frameBytes?: number;
  readonly timing?: Timing;
}

export async function startStreamRig(o: StreamRigOptions): Promise<StreamRig> {
  const spec = lookupPolicy(o.policies, o.tenant, STREAM_RESOURCE);
  const limit = { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
  const multiple = o.multiple ?? 10;
  const offered = limit.refillPerSecond * multiple;
  const frameBytes = o.frameBytes ?? 4096;
  const ids = o.regions.map((r) => r.id);
  const records: StreamRecord[] = [];
  const errors: string[] = [];
  const redis: ReturnType<typeof connectRegionRedis>[] = [];
  const servers: ExampleServer[] = [];
  const client = ids.map(() => ({ buffered: 0, sent: 0 }));
  const runs: Promise<unknown>[] = [];
  let stopping = false;
  const stopAll = async () => {
    stopping = true;
    await Promise.allSettled(runs);
    await Promise.allSettled(servers.map((s) => s.close()));
    await Promise.allSettled(redis.map((r) => r.quit().catch(() => r.disconnect())));
  };
  try {
    for (const [i, region] of o.regions.entries()) {
      const conn = connectRegionRedis(region.redis);
      redis.push(conn);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`stream: ${region.id} Redis not ready`)), 10_000);
        conn.once("ready", () => {
          clearTimeout(t);
          resolve();
        });
      });
      servers.push(
        await startExampleServer({
          store: createRedisStore({
            redis: conn,
            region: region.id,
            timing: o.timing ?? { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
          }),
          policies: o.policies,
          regions: ids,
          regionId: region.id,
          reportIntervalMs: 0,
          onFrame: (tenant, _data, info) => {
            if (tenant !== o.tenant) return;
            records.push({
              region: i,
              sentMs: info.readAtMs - o.originMs,
              answeredMs: info.admittedAtMs - o.originMs,
              bytes: info.bytes,
            });
          },
        }),
      );
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  return {
    tenant: o.tenant,
    resource: STREAM_RESOURCE,
    limit,
    offeredPerClient: offered,
    multiple,
    regionIds: ids,
    records,
    errors,
    startClients(durationMs) {
      for (const [i, s] of servers.entries()) {
        runs.push(
          runFloodClient({
            url: s.url,
            tenant: o.tenant,
            frameBytes,
            bytesPerSecond: offered,
            durationMs,
            // Enough to show the stall; the rest of the offered bytes are never queued.
            bufferedBytesMax: 4 * 1024 * 1024,
            doneWhen: () => stopping,
            onTick: (t) => {
              client[i]!.buffered = t.bufferedAmount;
              client[i]!.sent = t.sentBytes;
            },
          }).then(
            () => {
              client[i]!.buffered = 0;
            },
            (err: unknown) => {
              errors.push(`${ids[i]}: ${err instanceof Error ? err.message : String(err)}`);
            },
          ),
        );
      }
    },
    stats() {
      return servers.map((s, i) => {
        const conns = s.limiter.openConnections();
        return {
          id: ids[i]!,
          connections: conns.length,
          paused: conns.filter((c) => c.stats().paused).length,
          clientBufferedBytes: client[i]!.buffered,
          clientSentBytes: client[i]!.sent,
        };
      });
    },
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };
}

/** Streamed bytes/s per region over the last `windowMs` before `nowMs` (scans back from the end). */
export function recentStreamRates(
  records: readonly StreamRecord[],
  regionCount: number,
  nowMs: number,
  windowMs = 1000,
): number[] {
  const out = new Array<number>(regionCount).fill(0);
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.answeredMs < nowMs - windowMs) break;
    if (r.answeredMs > nowMs) continue;
    out[r.region] = (out[r.region] ?? 0) + r.bytes;
  }
  return out.map((x) => (x * 1000) / windowMs);
}

/** Streamed bytes/s per region per bucket, by delivery time: [region][bucket]. */
export function streamRateSeries(
  records: readonly StreamRecord[],
  regionCount: number,
  startMs: number,
  endMs: number,
  bucketMs = 1000,
): number[][] {
  const n = Math.max(1, Math.ceil((endMs - startMs) / bucketMs));
  const rows = Array.from({ length: regionCount }, () => new Array<number>(n).fill(0));
  for (const r of records) {
    const b = Math.floor((r.answeredMs - startMs) / bucketMs);
    const row = rows[r.region];
    if (row && b >= 0 && b < n) row[b] = row[b]! + (r.bytes * 1000) / bucketMs;
  }
  return rows;
}
