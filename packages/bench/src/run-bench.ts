// `geoquota bench`: every section against redis-servers started here (one per
// section, so no section inherits another's keys or load), one table on the
// injected writer and one JSON file.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { startRedis } from "@geoquota/procs";
import { benchCrdtGossip, type CrdtGossipResult } from "./crdt-gossip.js";
import { benchDegraded, type DegradedResult } from "./degraded.js";
import { benchFootprint, type FootprintResult } from "./footprint.js";
import { benchHttpPath, type HttpPathResult } from "./http-path.js";
import { benchLeasedPath, type LeasedPathResult } from "./leased-path.js";
import { describeMachine, type Machine } from "./machine.js";
import { benchMemory, type MemoryResult } from "./memory.js";
import { benchPeers, type PeersResult, peersRows, type StartPeersCluster } from "./peers.js";
import { benchRedisCost, type RedisCostResult } from "./redis-cost.js";
import { benchRedisPath, type RedisPathResult } from "./redis-path.js";
import { benchRlqsPath, type RlqsPathResult, rlqsRows, type StartRlqsCluster } from "./rlqs-path.js";
import { benchRlsPath, type RlsPathResult } from "./rls-path.js";
import {
  crdtRows,
  degradedRows,
  footprintRows,
  httpRows,
  leasedRows,
  memoryRows,
  redisCostRows,
  redisRows,
  rlsRows,
  skewRows,
} from "./rows.js";
import {
  benchScale,
  type ScaleResult,
  type StartLoneRegion,
  type StartScaleCluster,
  scaleRows,
} from "./scale.js";
import { benchSkew, type SkewResult } from "./skew.js";
import { renderTable } from "./table.js";
import type { Budget, Row, Write } from "./types.js";

export interface RunBenchOptions {
  readonly smoke: boolean;
  /** JSON results path. */
  readonly outPath: string;
  readonly write: Write;
  /** The CLI's local-cluster orchestrator (injected: the bench package does not depend on the CLI). */
  readonly startCluster: StartPeersCluster & StartRlqsCluster & StartScaleCluster;
  /** The CLI's lone region among in-process peers (section 13). */
  readonly startLoneRegion: StartLoneRegion;
  /** Only these sections (SECTIONS names); absent or empty: all. */
  readonly sections?: readonly string[];
}

/** Section names for `--section` (a before/after of one path without the whole run). */
export const SECTIONS = [
  "redis",
  "http",
  "leased",
  "crdt",
  "skew",
  "memory",
  "rls",
  "degraded",
  "footprint",
  "peers",
  "rlqs",
  "redis-cost",
  "scale",
] as const;
export type SectionName = (typeof SECTIONS)[number];

/** The sections to run: all, or the names given (GQ_ERR-style message naming a wrong one). */
export function selectSections(names: readonly string[] | undefined): ReadonlySet<SectionName> {
  if (names === undefined || names.length === 0) return new Set(SECTIONS);
  const bad = names.filter((n) => !(SECTIONS as readonly string[]).includes(n));
  if (bad.length > 0) {
    throw new Error(`bench --section: unknown section ${bad.join(", ")} (known: ${SECTIONS.join(", ")})`);
  }
  return new Set(names as SectionName[]);
}

export interface BenchReport {
  readonly mode: "smoke" | "full";
  readonly startedAt: string;
  readonly durationS: number;
  readonly machine: Machine;
  /** Each section's result; absent when `sections` left it out. */
  readonly redisPath?: RedisPathResult;
  readonly httpPath?: HttpPathResult;
  readonly leasedPath?: LeasedPathResult;
  readonly crdtGossip?: CrdtGossipResult;
  readonly skew?: SkewResult;
  readonly memory?: MemoryResult;
  readonly rlsPath?: RlsPathResult;
  readonly peers?: PeersResult;
  readonly degraded?: DegradedResult;
  readonly footprint?: FootprintResult;
  readonly rlqsPath?: RlqsPathResult;
  readonly redisCost?: RedisCostResult;
  readonly scale?: ScaleResult;
  readonly rows: Row[];
}

export function budgetFor(smoke: boolean): Budget {
  return smoke ? { smoke, runMs: 700, rounds: 2 } : { smoke, runMs: 4000, rounds: 3 };
}

async function withRedis<T>(fn: (s: Awaited<ReturnType<typeof startRedis>>) => Promise<T>): Promise<T> {
  const server = await startRedis();
  try {
    return await fn(server);
  } finally {
    await server.stop();
  }
}

export async function runBench(o: RunBenchOptions): Promise<BenchReport> {
  const only = selectSections(o.sections); // a wrong name fails before anything starts
  const budget = budgetFor(o.smoke);
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const step = (name: string) =>
    o.write(`bench: ${name} (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
  step("machine");
  const machine = await withRedis(async (s) => {
    const c = s.client();
    try {
      return await describeMachine(c);
    } finally {
      c.disconnect();
    }
  });
  const section = async <T>(
    name: SectionName,
    label: string,
    fn: () => Promise<T>,
  ): Promise<T | undefined> => {
    if (!only.has(name)) return undefined;
    step(label);
    return fn();
  };
  const redisPath = await section("redis", "1 redis path", () => withRedis((s) => benchRedisPath(s, budget)));
  const httpPath = await section("http", "2 http path", () =>
    withRedis((s) => benchHttpPath(s, { ...budget, runMs: o.smoke ? 1000 : 5000 })),
  );
  const leasedPath = await section("leased", "3 leased path", () =>
    withRedis((s) => benchLeasedPath(s, budget)),
  );
  const crdtGossip = await section("crdt", "4 crdt + gossip", async () => benchCrdtGossip(budget));
  const skew = await section("skew", "5 skew on a 3-region cluster", () => benchSkew(o.startCluster, budget));
  const memory = await section("memory", "6 memory per key", () => withRedis((s) => benchMemory(s)));
  const rlsPath = await section("rls", "7 rls (gRPC) beside http", () =>
    withRedis((s) => benchRlsPath(s, { ...budget, runMs: o.smoke ? 1000 : 5000 })),
  );
  const degraded = await section("degraded", "8 degraded: the region's Redis down", () =>
    benchDegraded(budget),
  );
  // Never fails the run: a cluster that does not start is reported, not thrown.
  const footprint = await section("footprint", "9 footprint of idle processes", () =>
    benchFootprint(o.startCluster, budget),
  );
  const peers = await section("peers", "10 peers (gubernator, envoyproxy/ratelimit) under a partition", () =>
    benchPeers(o.startCluster, budget),
  );
  const rlqsPath = await section("rlqs", "11 rlqs local bucket beside rls, assignments, a hot region", () =>
    withRedis((s) => benchRlqsPath(s, o.startCluster, { ...budget, runMs: o.smoke ? 1000 : 5000 })),
  );
  // Never fails the run: without valgrind it says so.
  const redisCost = await section("redis-cost", "12 redis instructions per decision (callgrind)", () =>
    benchRedisCost(budget),
  );
  const scale = await section("scale", "13 scale: a round's cost as keys grow (10 regions)", () =>
    benchScale(o.startCluster, o.startLoneRegion, budget),
  );
  const rows = [
    ...(redisPath ? redisRows(redisPath) : []),
    ...(httpPath ? httpRows(httpPath) : []),
    ...(leasedPath ? leasedRows(leasedPath) : []),
    ...(crdtGossip ? crdtRows(crdtGossip) : []),
    ...(skew ? skewRows(skew) : []),
    ...(memory ? memoryRows(memory) : []),
    ...(rlsPath ? rlsRows(rlsPath) : []),
    ...(degraded ? degradedRows(degraded) : []),
    ...(footprint ? footprintRows(footprint) : []),
    ...(peers ? peersRows(peers) : []),
    ...(rlqsPath ? rlqsRows(rlqsPath) : []),
    ...(redisCost ? redisCostRows(redisCost) : []),
    ...(scale ? scaleRows(scale) : []),
  ];
  const report: BenchReport = {
    mode: o.smoke ? "smoke" : "full",
    startedAt,
    durationS: (performance.now() - t0) / 1000,
    machine,
    ...(redisPath ? { redisPath } : {}),
    ...(httpPath ? { httpPath } : {}),
    ...(leasedPath ? { leasedPath } : {}),
    ...(crdtGossip ? { crdtGossip } : {}),
    ...(skew ? { skew } : {}),
    ...(memory ? { memory } : {}),
    ...(rlsPath ? { rlsPath } : {}),
    ...(degraded ? { degraded } : {}),
    ...(footprint ? { footprint } : {}),
    ...(peers ? { peers } : {}),
    ...(rlqsPath ? { rlqsPath } : {}),
    ...(redisCost ? { redisCost } : {}),
    ...(scale ? { scale } : {}),
    rows,
  };
  const out = resolve(o.outPath);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  o.write(
    `\n${renderTable(rows)}\n\n${machine.nproc} × ${machine.cpuModel}, Node ${machine.node}, Redis ${machine.redis}, ` +
      `load ${machine.loadAverage}; ${report.mode} run, ${report.durationS.toFixed(0)} s; JSON: ${out}\n`,
  );
  return report;
}
