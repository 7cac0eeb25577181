// What a long run could accumulate, sampled every few seconds: each cluster
// process's resident memory (VmRSS) and open sockets (the `socket:[…]` links
// in /proc/PID/fd), and each region's Redis `used_memory`. A process is looked
// up by role each time (a restarted daemon or Redis has a new pid); one that
// is down at a sample leaves a gap. The verdict (`checkFlat`) is pure.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { connect } from "node:net";
import type { Cluster } from "../cluster/orchestrator.js";

export type ResourceMetric = "rssBytes" | "sockets" | "redisUsedMemoryBytes";

export interface ResourcePoint {
  readonly tMs: number;
  readonly value: number;
}

export interface ResourceSeries {
  /** e.g. `us-east-gossip`, `toxiproxy`. */
  readonly process: string;
  readonly metric: ResourceMetric;
  readonly points: ResourcePoint[];
}

/** Absolute slack per metric, for small values where a ratio means nothing (see checkFlat). */
export const FLAT_SLACK: Readonly<Record<ResourceMetric, number>> = {
  rssBytes: 24 * 1024 * 1024,
  // A limiter's inbound keep-alive connections follow the clients' concurrency,
  // which rises while checks are slow (a fault, a loaded machine): dozens of
  // sockets come and go without any leak. A leak over a 30-minute soak is
  // hundreds.
  sockets: 32,
  redisUsedMemoryBytes: 2 * 1024 * 1024,
};
export const FLAT_RATIO = 1.25;

export interface FlatVerdict {
  readonly process: string;
  readonly metric: ResourceMetric;
  readonly ok: boolean;
  /** Peak of each third of the run (warm-up, middle, last); null when a third has too few points. */
  readonly maxWarmup: number | null;
  readonly maxMiddle: number | null;
  readonly maxLast: number | null;
  readonly limit: number | null;
  readonly reason?: string;
}

/**
 * "Flat after warm-up": the run is cut into thirds by time; the first is
 * warm-up (caches, connection pools and V8's heap grow to their working size)
 * and is not judged. Then max(last third) ≤ 1.25 × max(middle third) + slack.
 * Why maxima of thirds: a leak grows with time, so the last third's peak
 * exceeds the middle third's by about its growth over a third of the run
 * (30 min: 10 min of growth), while GC sawtooth, a fault's burst of
 * reconnects and a restarted process's fresh start recur in both thirds and
 * cancel out in a comparison of peaks (a mean or a last value would not).
 * The ratio allows noise in proportion; the absolute slack keeps small
 * numbers (3 sockets becoming 5 during a reconnect) from failing. What it
 * catches: a linear leak of g per third on a base B fails once
 * g > B/2 + 2·slack (a 60 MiB daemon: ~100 MiB more per 10 minutes of a
 * 30-minute soak) — a leak that would exhaust a host in hours; slower ones
 * need a longer soak. A third
 * with fewer than 3 points cannot be judged and fails: a soak too short to
 * show flatness must not claim it.
 */
export function checkFlat(series: ResourceSeries, startMs: number, endMs: number): FlatVerdict {
  const third = (endMs - startMs) / 3;
  const maxOf = (from: number, to: number) => {
    const pts = series.points.filter((p) => p.tMs >= from && p.tMs < to);
    return pts.length < 3 ? null : Math.max(...pts.map((p) => p.value));
  };
  const maxWarmup = maxOf(startMs, startMs + third);
  const maxMiddle = maxOf(startMs + third, startMs + 2 * third);
  const maxLast = maxOf(startMs + 2 * third, endMs + 1);
  const base = { process: series.process, metric: series.metric, maxWarmup, maxMiddle, maxLast };
  if (maxMiddle === null || maxLast === null)
    return { ...base, ok: false, limit: null, reason: "too few samples in the middle or last third" };
  const limit = FLAT_RATIO * maxMiddle + FLAT_SLACK[series.metric];
  return maxLast <= limit
    ? { ...base, ok: true, limit }
    : { ...base, ok: false, limit, reason: `grew: last third's peak ${maxLast} > ${limit.toFixed(0)}` };
}

/** VmRSS of a process in bytes; null when it is gone. */
export function rssBytes(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Open sockets of a process (its fds that link to `socket:[inode]`); null when it is gone. */
export function socketCount(pid: number): number | null {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return null;
  }
  let n = 0;
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) n++;
    } catch {
      // closed between the listing and the link: not open any more
    }
  }
  return n;
}

/** `used_memory` from INFO memory on one short-lived connection; null when the server does not answer. */
export function redisUsedMemory(host: string, port: number, timeoutMs = 1000): Promise<number | null> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let text = "";
    const done = (v: number | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.once("error", () => done(null));
    socket.once("connect", () => socket.write("INFO memory\r\n"));
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (text.startsWith("-")) return done(null);
      const m = /^used_memory:(\d+)\r?$/m.exec(text);
      if (m) done(Number(m[1]));
    });
  });
}

export class ResourceSampler {
  readonly series = new Map<string, ResourceSeries>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly cluster: Cluster,
    private readonly now: () => number,
    readonly intervalMs: number,
  ) {}

  private push(process: string, metric: ResourceMetric, value: number | null, tMs: number): void {
    if (value === null) return;
    const key = `${process}/${metric}`;
    let s = this.series.get(key);
    if (!s) {
      s = { process, metric, points: [] };
      this.series.set(key, s);
    }
    s.points.push({ tMs, value });
  }

  /** The cluster's processes by role, with their current pids. */
  private processes(): Array<[string, number]> {
    const out: Array<[string, number]> = [];
    for (const r of this.cluster.regions) {
      out.push([`${r.id}-redis`, r.redisServer.process.pid]);
      out.push([`${r.id}-limiter`, r.limiter.pid]);
      out.push([`${r.id}-gossip`, r.gossip.pid]);
    }
    const toxi = this.cluster.toxiproxy;
    if (toxi) out.push(["toxiproxy", toxi.server.process.pid]);
    return out;
  }

  async sample(): Promise<void> {
    const tMs = this.now();
    for (const [name, pid] of this.processes()) {
      if (pid <= 0) continue;
      this.push(name, "rssBytes", rssBytes(pid), tMs);
      this.push(name, "sockets", socketCount(pid), tMs);
    }
    await Promise.all(
      this.cluster.regions.map(async (r) => {
        const { hostname, port } = new URL(r.redis);
        this.push(
          `${r.id}-redis`,
          "redisUsedMemoryBytes",
          await redisUsedMemory(hostname, Number(port)),
          tMs,
        );
      }),
    );
  }

  start(): void {
    if (this.timer) return;
    const tick = () => {
      if (this.running) return; // a slow sample never piles up
      this.running = this.sample().finally(() => {
        this.running = undefined;
      });
    };
    tick();
    this.timer = setInterval(tick, this.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
