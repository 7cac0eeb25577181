// Section 9 (issue 24 point 8): the resident memory of idle processes. A local
// cluster (the CLI's orchestrator: the bundled builds, dist/bundle/, one
// redis-server, limiter and gossip daemon per region) of 10 regions is started
// and left idle; then each limiter's and daemon's RSS (/proc/PID/status VmRSS)
// and, where its /metrics answers, its V8 heap in use. A loaded machine may
// not start 10 regions in time: the section then tries 5, then 3, and says so
// in its output; it never fails the bench (a cluster that does not start at
// all is reported as 0 regions with the error). Smoke: 2 regions.
import { readFileSync } from "node:fs";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StartCluster } from "./skew.js";
import type { Budget } from "./types.js";

export type ProcessKind = "limiter" | "gossip daemon";

export interface FootprintKind {
  readonly kind: ProcessKind;
  readonly processes: number;
  readonly maxRssBytes: number;
  readonly medianRssBytes: number;
  /** Median V8 heap in use (nodejs_heap_size_used_bytes of /metrics; 0 when not exported). */
  readonly medianHeapUsedBytes: number;
}

export interface FootprintResult {
  readonly regionsAsked: number;
  readonly regions: number;
  /** Why fewer regions than asked (or none) were measured; empty when all started. */
  readonly note: string;
  readonly idleMs: number;
  readonly kinds: FootprintKind[];
}

/** Resident set of a process, bytes (0 when it is gone). */
export function rssBytes(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
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

function kind(name: ProcessKind, pids: number[], heaps: number[]): FootprintKind {
  const rss = pids.map(rssBytes).filter((b) => b > 0);
  return {
    kind: name,
    processes: rss.length,
    maxRssBytes: rss.length > 0 ? Math.max(...rss) : 0,
    medianRssBytes: median(rss),
    medianHeapUsedBytes: median(heaps.filter((h) => h > 0)),
  };
}

export async function benchFootprint(startCluster: StartCluster, budget: Budget): Promise<FootprintResult> {
  const tries = budget.smoke ? [2] : [10, 5, 3];
  const idleMs = budget.smoke ? 1000 : 5000;
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
        await new Promise((r) => setTimeout(r, idleMs));
        const regions = cluster.regions as readonly FootprintRegion[];
        const pidsOf = (p: Proc | undefined) => (p?.child.pid !== undefined ? [p.child.pid] : []);
        const limiterHeaps = await Promise.all(regions.map((r) => heapUsed(r.url)));
        const gossipHeaps = await Promise.all(
          regions.map((r) => (r.gossipUrl !== undefined ? heapUsed(r.gossipUrl) : Promise.resolve(0))),
        );
        const kinds = [
          kind(
            "limiter",
            regions.flatMap((r) => pidsOf(r.limiter)),
            limiterHeaps,
          ),
          kind(
            "gossip daemon",
            regions.flatMap((r) => pidsOf(r.gossip)),
            gossipHeaps,
          ),
        ];
        if (n < tries[0]!) notes.push(`measured ${n} regions instead of ${tries[0]}`);
        return { regionsAsked: tries[0]!, regions: n, note: notes.join("; "), idleMs, kinds };
      } finally {
        await cluster.stop().catch(() => {});
      }
    }
    return { regionsAsked: tries[0]!, regions: 0, note: notes.join("; "), idleMs, kinds: [] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
