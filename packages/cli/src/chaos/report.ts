// How a chaos run reads: one verdict line per scenario with its figures, the
// failures spelled out, and the JSON report (every measured figure, the seed,
// the faults with their times) that the CLI writes.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fmtBound } from "../demo/summary.js";
import type { ScenarioResult } from "./run-scenario.js";

function ms(v: number | null): string {
  return v === null ? "never" : `${Math.round(v)} ms`;
}

/** Lines for one scenario: `PASS name (seed S): admitted X ≤ bound Y, …` plus failures. */
export function scenarioLines(r: ScenarioResult): string[] {
  const w = r.bound.worstInterval;
  const conv = r.faults.map((f) => f.convergenceMs);
  const worstConv =
    conv.length === 0 ? "n/a" : conv.some((c) => c === null) ? "never" : ms(Math.max(...(conv as number[])));
  const head =
    `${r.ok ? "PASS" : "FAIL"} ${r.name} (seed ${r.seed}): admitted ${r.bound.admitted} ${r.bound.ok ? "≤" : ">"} bound ${fmtBound(r.bound.bound)}` +
    (w ? `, tightest interval ${w.admitted} vs ${fmtBound(w.bound)}` : "") +
    `; max Σ shares ${r.shares.maxSumPpm} ppm (${r.shares.groupsChecked} groups${r.shares.groupsExcluded > 0 ? `, ${r.shares.groupsExcluded} after clock steps not checked` : ""}, hottest share ${r.shares.maxRegionSharePpm})` +
    `; convergence ${worstConv}; admitted ${(r.utilization * 100).toFixed(1)}% of the bound` +
    (r.rateAfterHealOfR === null ? "" : `, ${(r.rateAfterHealOfR * 100).toFixed(0)}% of r after the heal`);
  const lines = [head];
  for (const f of r.faults)
    lines.push(
      `  ${f.label}: injected ${(f.injectedMs / 1000).toFixed(2)}s, healed ${(f.healedMs / 1000).toFixed(2)}s, links up ${ms(f.linksUpMs)}, converged ${ms(f.convergenceMs)} after the heal` +
        (f.reconnectedAtMs === null || f.convergenceMs === null
          ? ""
          : ` (${ms(f.healedMs + f.convergenceMs - f.reconnectedAtMs)} after the daemons reconnected)`),
    );
  const lat = r.latency;
  lines.push(
    `  check latency p50/p99: ${lat.beforeFaults.p50Ms.toFixed(1)}/${lat.beforeFaults.p99Ms.toFixed(1)} ms before faults` +
      (lat.duringGossipFaults.count > 0
        ? `, ${lat.duringGossipFaults.p50Ms.toFixed(1)}/${lat.duringGossipFaults.p99Ms.toFixed(1)} ms during gossip faults`
        : ""),
  );
  for (const f of r.failClosed)
    lines.push(
      `  fail-closed ${f.region}: admitted ${f.admittedDuringCut} ≤ leased ${f.leasedMax}; ${f.degradedDuringCut}/${f.answeredDuringCut} answers degraded`,
    );
  for (const f of r.failures) lines.push(`  VIOLATION: ${f}`);
  return lines;
}

export interface ChaosReport {
  readonly seed: number;
  readonly startedAt: string;
  readonly durationMs: number;
  readonly ok: boolean;
  readonly scenarios: readonly ScenarioResult[];
}

/** JSON of a report: Maps (sample counters) never reach it; numbers as measured. */
export function writeChaosReport(path: string, report: ChaosReport): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
}
