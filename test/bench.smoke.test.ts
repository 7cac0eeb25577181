// The bench cannot rot: `geoquota bench --smoke` runs every section end to
// end (real redis-servers, a real 3-region cluster) and its JSON holds every
// section with finite numbers. No timing is asserted: this machine is shared.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCluster, startLoneRegion } from "@geoquota/cli";
import { afterAll, expect, it } from "vitest";
import { runBench } from "../packages/bench/src/index.js";

const dir = mkdtempSync(join(tmpdir(), "geoquota-bench-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every number anywhere in the value, with its path. */
function numbers(value: unknown, path = "$"): [string, number][] {
  if (typeof value === "number") return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => numbers(v, `${path}[${i}]`));
  if (value !== null && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => numbers(v, `${path}.${k}`));
  }
  return [];
}

// About 125 s on a quiet 2-core machine; beside `stress-ng --cpu 2` and a soak
// (load 6–9) it passed 300 s: the timeout is a hang detector, not a deadline.
it("runs every section in smoke mode and writes finite figures", { timeout: 900_000 }, async () => {
  const outPath = join(dir, "bench.json");
  let printed = "";
  await runBench({ smoke: true, outPath, write: (s) => (printed += s), startCluster, startLoneRegion });
  const report = JSON.parse(readFileSync(outPath, "utf8")) as Record<string, unknown>;
  for (const section of [
    "machine",
    "redisPath",
    "httpPath",
    "leasedPath",
    "crdtGossip",
    "skew",
    "memory",
    "rlsPath",
    "peers",
    "degraded",
    "footprint",
    "rlqsPath",
    "redisCost",
    "scale",
    "rows",
  ]) {
    expect(report[section], section).toBeDefined();
  }
  const nums = numbers(report);
  expect(nums.length).toBeGreaterThan(50);
  const bad = nums.filter(([, n]) => !Number.isFinite(n));
  expect(bad).toEqual([]);
  // Each section measured something.
  const r = report as unknown as {
    redisPath: {
      geoquota: { decisions: number };
      batch500: { decisions: number };
      batch1ms: { decisions: number };
    };
    httpPath: { runs: unknown[] };
    leasedPath: { variants: unknown[] };
    crdtGossip: { gossip: unknown[] };
    skew: { phases: unknown[] };
    memory: { rows: unknown[] };
    degraded: { modes: { outage: { decisions: number } }[] };
    footprint: { regions: number };
    rlsPath: {
      runs: { path: string; rate: number; decisionsPerSecond: number; errors: number; denied: number }[];
      ratios: unknown[];
    };
    peers: {
      runs: { system: string; error?: string; whole?: { sent: number }; partition?: { sent: number } }[];
    };
    rlqsPath: {
      local: { decisions: number };
      rls: { rate: number; decisionsPerSecond: number; errors: number; denied: number }[];
      steady: { proxies: { received: number }[]; errors: number };
      hot: { admittedEachSecond: number[]; errors: number };
    };
    redisCost: { skipped: string; variants: Record<string, { decisions: number }> };
    scale: {
      steps: { setup: string; keys: number; churn: { rounds: number }; achievedPerRound: number }[];
    };
  };
  expect(r.redisPath.geoquota.decisions).toBeGreaterThan(0);
  expect(r.redisPath.batch500.decisions).toBeGreaterThan(0);
  expect(r.redisPath.batch1ms.decisions).toBeGreaterThan(0);
  expect(r.httpPath.runs.length).toBe(6);
  expect(r.leasedPath.variants.length).toBe(3);
  expect(r.crdtGossip.gossip.length).toBe(2);
  expect(r.skew.phases.length).toBe(4);
  expect(r.memory.rows.length).toBe(5);
  // Degraded: all three modes decided during the outage; footprint never fails the run.
  expect(r.degraded.modes.length).toBe(3);
  for (const m of r.degraded.modes) expect(m.outage.decisions).toBeGreaterThan(0);
  expect(r.footprint.regions).toBeGreaterThanOrEqual(0);
  // The RLS section: both paths at 1k, 5k and flat out, every decision an admission.
  expect(r.rlsPath.runs.map((x) => `${x.path}@${x.rate}`)).toEqual([
    "http@1000",
    "grpc@1000",
    "http@5000",
    "grpc@5000",
    "http@0",
    "grpc@0",
  ]);
  for (const x of r.rlsPath.runs) {
    expect(x.decisionsPerSecond, `${x.path}@${x.rate}`).toBeGreaterThan(0);
    expect([x.errors, x.denied], `${x.path}@${x.rate}`).toEqual([0, 0]);
  }
  expect(r.rlsPath.ratios.length).toBe(3);
  // The peers section: all three systems, each measured or (a peer that cannot be built or
  // started here) a run that says why; geoquota itself always runs.
  expect(r.peers.runs.map((x) => x.system)).toEqual(["geoquota", "gubernator", "envoy-ratelimit"]);
  for (const x of r.peers.runs) {
    if (x.system === "geoquota" || x.error === undefined) {
      expect(x.error, x.system).toBeUndefined();
      expect(x.whole?.sent, x.system).toBeGreaterThan(0);
      expect(x.partition?.sent, x.system).toBeGreaterThan(0);
    } else expect(x.error.length, x.system).toBeGreaterThan(0);
  }
  // The RLQS section: the local bucket decided, the RLS answered at 1k/s and flat out (every
  // decision an admission), each steady proxy got an assignment, the hot region admitted, and
  // no .bin/rlqs-client reported an error.
  const q = r.rlqsPath;
  expect(q.local.decisions).toBeGreaterThan(0);
  expect(q.rls.map((x) => x.rate)).toEqual([1000, 0]);
  for (const x of q.rls) {
    expect(x.decisionsPerSecond, `rls@${x.rate}`).toBeGreaterThan(0);
    expect([x.errors, x.denied], `rls@${x.rate}`).toEqual([0, 0]);
  }
  expect(q.steady.proxies.length).toBe(2);
  for (const p of q.steady.proxies) expect(p.received).toBeGreaterThan(0);
  expect(q.hot.admittedEachSecond.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  expect([q.steady.errors, q.hot.errors]).toEqual([0, 0]);
  // Instructions per decision (callgrind): every variant counted, or a reason (no valgrind).
  if (r.redisCost.skipped === "") {
    expect(Object.keys(r.redisCost.variants)).toEqual([
      "ceiling",
      "checkAllowed",
      "checkDenied",
      "checkBatched",
      "rlf",
    ]);
    for (const [v, f] of Object.entries(r.redisCost.variants)) expect(f.decisions, v).toBeGreaterThan(0);
  } else expect(r.redisCost.skipped).toMatch(/valgrind/);
  // The scale section: the cluster and the lone region each ran rounds while their keys churned.
  expect(r.scale.steps.map((x) => x.setup)).toEqual(["cluster", "lone"]);
  for (const x of r.scale.steps) {
    expect(x.churn.rounds, `${x.setup} rounds`).toBeGreaterThan(0);
    expect(x.achievedPerRound, `${x.setup} checks`).toBeGreaterThan(0);
  }
  expect(printed).toContain("13 scale");
  expect(printed).toContain("7 rls (gRPC) beside http");
  expect(printed).toContain("11 rlqs local bucket beside rls");
  expect(printed).toContain("10 peers, partition");
  expect(printed).toContain("| section");
});
