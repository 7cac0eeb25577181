// Section 9 (issue 24 point 8): the resident memory of idle processes. A local
// cluster (the CLI's orchestrator: the bundled builds, dist/bundle/, one
// redis-server, limiter and gossip daemon per region) of 10 regions is started
// and left idle; each limiter's and daemon's memory is read three times: 5 s
// after the cluster is up (the start's transient: V8's young generation grown
// to 2 × 16 MB by the start's allocations), after 25 s idle, and after 120 s
// idle (settled: the footprint the target is read on). Why three: V8 gives the
// young generation back only in a GC that finds allocation low, and an idle
// process has few GCs. Its memory reducer checks every 8 s whether the mutator
// would keep > 99.3% of the time against the scavenge speed measured so far;
// the speed a process measured during a 10-region start on 2 cores is low
// (scavenges of 15-90 ms), so an idle limiter polling its policy 4 times a
// second passes that check only after 40-100 s (measured: the 10 limiters'
// reducing GCs at 40-100 s; before, 84-86 MB, after, 67-69 MB). A limiter
// started alone on a quiet machine measures a fast scavenger and shrinks in
// about 8 s. Per process: RSS (/proc/PID/status
// VmRSS), split into anonymous memory (heap, stacks: this process's own) and
// file-backed pages (the node binary's code and data, shared by every node
// process on the host), PSS (smaps_rollup: shared pages divided among the
// processes that map them), and, where its /metrics answers, the V8 heap in
// use. A loaded machine may not start 10 regions in time: the section then
// tries 5, then 3, and says so in its output; it never fails the bench (a
// cluster that does not start at all is reported as 0 regions with the
// error). Smoke: 2 regions, 1 s, 3 s and 4 s.
import { readFileSync } from "node:fs";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StartCluster } from "./skew.js";
import type { Budget } from "./types.js";

export type ProcessKind = "limiter" | "gossip daemon";

/** One reading of every process of a kind: max and median over the processes. */
export interface FootprintSample {
  /** ms since the cluster was up. */
  readonly atMs: number;
  readonly maxRssBytes: number;
  readonly medianRssBytes: number;
  /** Median anonymous resident memory (RssAnon): the process's own. */
  readonly medianAnonBytes: number;
  /** Median file-backed resident memory (RssFile): mostly the node binary, shared. */
  readonly medianFileBytes: number;
  /** Median proportional set size (shared pages divided among their processes; 0 when unreadable). */
  readonly medianPssBytes: number;
  /** Median V8 heap in use (nodejs_heap_size_used_bytes of /metrics; 0 when not exported). */
  readonly medianHeapUsedBytes: number;
}

export interface FootprintKind {
  readonly kind: ProcessKind;
  readonly processes: number;
  /** 5 s after the cluster is up. */
  readonly start: FootprintSample;
  /** After `idleMs` idle. */
  readonly idle: FootprintSample;
  /** After `settledMs` idle: the figure the target is read on. */
  readonly settled: FootprintSample;
}

export interface FootprintResult {
  readonly regionsAsked: number;
  readonly regions: number;
  /** Why fewer regions than asked (or none) were measured; empty when all started. */
  readonly note: string;
  readonly idleMs: number;
  readonly settledMs: number;
  readonly kinds: FootprintKind[];
}

interface Memory {
  readonly rss: number;
  readonly anon: number;
  readonly file: number;
  readonly pss: number;
}

const kB = (text: string, field: string): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m").exec(text);
  return m ? Number(m[1]) * 1024 : 0;
};

/** A process's resident memory, bytes (all 0 when it is gone). */
export function memoryOf(pid: number): Memory {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    let pss = 0;
    try {
      pss = kB(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"), "Pss");
    } catch {
      // smaps_rollup needs Linux 4.14+ and the right to read it: PSS is then not reported.
    }
    return { rss: kB(status, "VmRSS"), anon: kB(status, "RssAnon"), file: kB(status, "RssFile"), pss };
  } catch {
    return { rss: 0, anon: 0, file: 0, pss: 0 };
  }
}

async function heapUsed(url: string): Promise<number> {
  try {
    const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return 0;
    const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([0-9.e+]+)/m.exec(await res.text());
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

const median = (xs: number[]): number => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

interface Proc {
  readonly child: { readonly pid?: number | undefined };
}
interface FootprintRegion {
  readonly url: string;
  readonly gossipUrl?: string;
  readonly limiter?: Proc;
  readonly gossip?: Proc;
}

async function sample(pids: number[], urls: string[], atMs: number): Promise<FootprintSample> {
  const mem = pids.map(memoryOf).filter((m) => m.rss > 0);
  const heaps = await Promise.all(urls.map(heapUsed));
  const med = (f: (m: Memory) => number) => median(mem.map(f));
  return {
    atMs,
    maxRssBytes: mem.length > 0 ? Math.max(...mem.map((m) => m.rss)) : 0,
    medianRssBytes: med((m) => m.rss),
    medianAnonBytes: med((m) => m.anon),
    medianFileBytes: med((m) => m.file),
    medianPssBytes: med((m) => m.pss),
    medianHeapUsedBytes: median(heaps.filter((h) => h > 0)),
  };
}

export async function benchFootprint(startCluster: StartCluster, budget: Budget): Promise<FootprintResult> {
  const tries = budget.smoke ? [2] : [10, 5, 3];
  const startMs = budget.smoke ? 1000 : 5000;
  const idleMs = budget.smoke ? 3000 : 25_000;
  const settledMs = budget.smoke ? 4000 : 120_000;
  const dir = mkdtempSync(join(tmpdir(), "geoquota-footprint-"));
  const policiesFile = join(dir, "policies.json");
  writeFileSync(
    policiesFile,
    JSON.stringify({ default: { algorithm: "token_bucket", capacity: 1000, refillPerSecond: 100 } }),
  );
  const notes: string[] = budget.smoke ? ["smoke: 2 regions"] : [];
  try {
    for (const n of tries) {
      let cluster: Awaited<ReturnType<StartCluster>>;
      try {
        cluster = await startCluster({ regions: n, policiesFile, configOverrides: {} });
      } catch (err) {
        notes.push(`${n} regions did not start (${String(err).split("\n")[0]!.slice(0, 160)})`);
        continue;
      }
      try {
        const regions = cluster.regions as readonly FootprintRegion[];
        const pidsOf = (p: Proc | undefined) => (p?.child.pid !== undefined ? [p.child.pid] : []);
        const limiters = {
          pids: regions.flatMap((r) => pidsOf(r.limiter)),
          urls: regions.map((r) => r.url),
        };
        const daemons = {
          pids: regions.flatMap((r) => pidsOf(r.gossip)),
          urls: regions.flatMap((r) => (r.gossipUrl !== undefined ? [r.gossipUrl] : [])),
        };
        const up = performance.now();
        const at = async (ms: number) => {
          await new Promise((r) => setTimeout(r, Math.max(0, up + ms - performance.now())));
          return {
            limiter: await sample(limiters.pids, limiters.urls, ms),
            daemon: await sample(daemons.pids, daemons.urls, ms),
          };
        };
        const start = await at(startMs);
        const idle = await at(idleMs);
        const settled = await at(settledMs);
        const kinds: FootprintKind[] = [
          {
            kind: "limiter",
            processes: limiters.pids.length,
            start: start.limiter,
            idle: idle.limiter,
            settled: settled.limiter,
          },
          {
            kind: "gossip daemon",
            processes: daemons.pids.length,
            start: start.daemon,
            idle: idle.daemon,
            settled: settled.daemon,
          },
        ];
        if (n < tries[0]!) notes.push(`measured ${n} regions instead of ${tries[0]}`);
        return { regionsAsked: tries[0]!, regions: n, note: notes.join("; "), idleMs, settledMs, kinds };
      } finally {
        await cluster.stop().catch(() => {});
      }
    }
    return { regionsAsked: tries[0]!, regions: 0, note: notes.join("; "), idleMs, settledMs, kinds: [] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
