// `geoquota bench`: every section against redis-servers started here (one per
// section, so no section inherits another's keys or load), one table on the
// injected writer and one JSON file.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { startRedis } from "@geoquota/procs";
import { benchCrdtGossip, type CrdtGossipResult } from "./crdt-gossip.js";
import { benchHttpPath, type HttpPathResult } from "./http-path.js";
import { benchLeasedPath, type LeasedPathResult } from "./leased-path.js";
import { describeMachine, type Machine } from "./machine.js";
import { benchMemory, type MemoryResult } from "./memory.js";
import { benchRedisPath, type RedisPathResult } from "./redis-path.js";
import { benchRlsPath, type RlsPathResult } from "./rls-path.js";
import { crdtRows, httpRows, leasedRows, memoryRows, redisRows, rlsRows, skewRows } from "./rows.js";
import { benchSkew, type SkewResult, type StartCluster } from "./skew.js";
import { renderTable } from "./table.js";
import type { Budget, Row, Write } from "./types.js";

export interface RunBenchOptions {
  readonly smoke: boolean;
  /** JSON results path. */
  readonly outPath: string;
  readonly write: Write;
  /** The CLI's local-cluster orchestrator (injected: the bench package does not depend on the CLI). */
  readonly startCluster: StartCluster;
}

export interface BenchReport {
  readonly mode: "smoke" | "full";
  readonly startedAt: string;
  readonly durationS: number;
  readonly machine: Machine;
  readonly redisPath: RedisPathResult;
  readonly httpPath: HttpPathResult;
  readonly leasedPath: LeasedPathResult;
  readonly crdtGossip: CrdtGossipResult;
  readonly skew: SkewResult;
  readonly memory: MemoryResult;
  readonly rlsPath: RlsPathResult;
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
  step("1 redis path");
  const redisPath = await withRedis((s) => benchRedisPath(s, budget));
  step("2 http path");
  const httpPath = await withRedis((s) => benchHttpPath(s, { ...budget, runMs: o.smoke ? 1000 : 5000 }));
  step("3 leased path");
  const leasedPath = await withRedis((s) => benchLeasedPath(s, budget));
  step("4 crdt + gossip");
  const crdtGossip = benchCrdtGossip(budget);
  step("5 skew on a 3-region cluster");
  const skew = await benchSkew(o.startCluster, budget);
  step("6 memory per key");
  const memory = await withRedis((s) => benchMemory(s));
  step("7 rls (gRPC) beside http");
  const rlsPath = await withRedis((s) => benchRlsPath(s, { ...budget, runMs: o.smoke ? 1000 : 5000 }));
  const rows = [
    ...redisRows(redisPath),
    ...httpRows(httpPath),
    ...leasedRows(leasedPath),
    ...crdtRows(crdtGossip),
    ...skewRows(skew),
    ...memoryRows(memory),
    ...rlsRows(rlsPath),
  ];
  const report: BenchReport = {
    mode: o.smoke ? "smoke" : "full",
    startedAt,
    durationS: (performance.now() - t0) / 1000,
    machine,
    redisPath,
    httpPath,
    leasedPath,
    crdtGossip,
    skew,
    memory,
    rlsPath,
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
