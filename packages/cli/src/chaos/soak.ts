// `geoquota chaos --soak DURATION`: ONE scenario as long as the soak, on one
// tenant, so the exact oracle (every sub-interval of the whole run) and the
// Σ-shares, convergence and fail-closed checks of run-scenario.ts cover all of
// it. The seeded plan (soak-plan.ts) moves the hot region and draws faults
// from the whole catalogue (faults.ts). Beside it the cluster's processes are
// sampled (resources.ts) and must stay flat after warm-up. The report (JSON
// and Markdown, with the fault timeline) goes to a directory.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import { regionIds } from "../cluster/ids.js";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import { fmtBound } from "../demo/summary.js";
import type { Writer } from "../demo/types.js";
import { type ClockFiles, clockFiles, clockStepsUnavailable, registerClockFiles } from "./clock.js";
import { CHAOS_RESOURCE, chaosClusterOptions, chaosTopology, prepareCluster } from "./cluster.js";
import { scenarioLines } from "./report.js";
import { checkFlat, type FlatVerdict, ResourceSampler, type ResourceSeries } from "./resources.js";
import { Rng, subSeed } from "@geoquota/sim";
import { runScenario, type ScenarioResult } from "./run-scenario.js";
import { planSoak, type SoakPhase } from "./soak-plan.js";

export interface SoakOptions {
  readonly seed: number;
  readonly durationMs: number;
  readonly reportDir: string;
  readonly write: Writer;
  readonly startCluster: (o: ClusterOptions) => Promise<Cluster>;
  readonly signal?: AbortSignal;
  /** The control: plant a fault the oracle is not told about (a limit raised tenfold). */
  readonly unsafe?: boolean;
  /** Leave clock steps out even where libfaketime is, for this reason (said in the report). */
  readonly noClockSteps?: string;
}

export interface SoakReport {
  readonly seed: number;
  readonly replay: string;
  readonly startedAt: string;
  readonly durationMs: number;
  readonly wallMs: number;
  readonly ok: boolean;
  readonly failures: readonly string[];
  /** Catalogue kinds this run left out, each with why (clock steps without libfaketime). */
  readonly skipped: readonly string[];
  readonly phases: readonly SoakPhase[];
  readonly scenario: ScenarioResult;
  readonly resources: {
    readonly intervalMs: number;
    readonly verdicts: readonly FlatVerdict[];
    readonly series: readonly ResourceSeries[];
  };
}

export const SOAK_MIN_MS = 30_000;

/** Every few seconds: about 60 points in a short soak, every 5 s in a long one. */
export function resourceIntervalMs(durationMs: number): number {
  return Math.min(5000, Math.max(500, Math.round(durationMs / 60)));
}

export async function runSoak(o: SoakOptions): Promise<{ exitCode: number; report: SoakReport }> {
  const w = o.write;
  const topology = chaosTopology(3);
  const replay = `geoquota chaos --soak ${Math.round(o.durationMs / 1000)}s --seed ${o.seed}`;
  w(`soak seed ${o.seed} (replay: ${replay})\n`);
  w("starting a local cluster (3 regions, gossip and Redis links behind Toxiproxy)…\n");
  const noClock = o.noClockSteps ?? clockStepsUnavailable();
  const skipped = noClock === undefined ? [] : [`clock-step: ${noClock}`];
  if (noClock !== undefined) w(`soak: SKIPPING clock steps: ${noClock}\n`);
  else w("soak: every region's redis-server under libfaketime (clock steps on)\n");
  const clock: ClockFiles | undefined =
    noClock === undefined ? clockFiles(regionIds(topology.regions)) : undefined;
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  let cluster: Cluster;
  try {
    cluster = await o.startCluster({
      ...chaosClusterOptions(topology),
      // Failovers move the limiter's and the daemon's Redis address together.
      daemonRedisProxy: true,
      ...(clock ? { redis: clock.redis } : {}),
    });
  } catch (err) {
    clock?.remove();
    throw err;
  }
  if (clock) registerClockFiles(cluster, clock.files);
  let scenario: ScenarioResult;
  let scenarioFailures: readonly string[] | undefined;
  let toxiproxyDump: string | undefined;
  let resources: ResourceSampler;
  let phases: readonly SoakPhase[];
  let startMs: number;
  const elapsed = () => performance.now() - t0;
  try {
    const ids = cluster.regions.map((r) => r.id);
    const spec = lookupPolicy(loadPolicies(cluster.policiesPath, ids), "probe", CHAOS_RESOURCE);
    const limit = { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
    await prepareCluster(cluster, new Rng(subSeed(o.seed, "soak-prepare")));
    const plan = planSoak(
      o.seed,
      o.durationMs,
      { regionIds: ids, leasedRegion: topology.leasedRegion },
      { unsafe: o.unsafe === true, skip: noClock === undefined ? [] : ["clock-step"] },
    );
    phases = plan.phases;
    w(
      `soak: ${Math.round(o.durationMs / 1000)} s, ${plan.scenario.faults.length} faults, the hot region moves ${phases.length - 1} times\n`,
    );
    resources = new ResourceSampler(cluster, elapsed, resourceIntervalMs(o.durationMs));
    startMs = elapsed();
    resources.start();
    try {
      scenario = await runScenario({
        cluster,
        plan: plan.scenario,
        tenant: `soak-${o.seed}`,
        durationMs: o.durationMs,
        limit,
        leasedRegion: topology.leasedRegion,
        demandSchedule: plan.phases.slice(1),
        // Faults overlap without pause here, so "the daemons reconnected" is
        // rarely quiet for long, and this machine is shared: the soak requires
        // every heal's counters to converge, within 10 s of the reconnect. The
        // 1 s figure is the scenario tier's, with one fault at a time.
        convergenceMaxMs: 10_000,
        // An unanswered check blinds the oracle and fails the soak; on a
        // shared 2-core machine the p99 reached 4 s, so 5 s was noise.
        requestTimeoutMs: 15_000,
        // A loss long before or after a heal says nothing about that heal's target.
        lossWindowMs: 10_000,
        // 3 regions every 40 ms, with room for a slow tick's catch-up.
        samplesMax: Math.ceil((o.durationMs + 60_000) / 40) * 3 * 2,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      scenarioFailures = scenario.failures;
    } finally {
      await resources.stop();
    }
  } finally {
    // A Toxiproxy that kept answering 503 past the retries is stuck (a deadlock in
    // runs B and C of docs/soak-30m.md): its goroutines go into the report.
    toxiproxyDump = await dumpIfStuck(cluster, o.reportDir, [...(scenarioFailures ?? [])]);
    if (toxiproxyDump !== undefined)
      w(`soak: Toxiproxy stuck answering 503: goroutine dump in ${toxiproxyDump}\n`);
    await cluster.stop();
    clock?.remove();
  }
  // Judged over the traffic's span: from the start to the end of the planned run.
  const endMs = startMs + Math.min(o.durationMs, elapsed() - startMs);
  const verdicts = [...resources.series.values()].map((s) => checkFlat(s, startMs, endMs));
  const failures = [
    ...scenario.failures,
    ...verdicts
      .filter((v) => !v.ok)
      .map((v) => `resources not flat: ${v.process} ${v.metric}: ${v.reason ?? "?"}`),
  ];
  if (o.signal?.aborted) failures.push("interrupted: the soak did not run its whole duration");
  if (toxiproxyDump !== undefined)
    failures.push(
      `Toxiproxy stuck answering 503 (the harness, not geoquota): goroutine dump in ${toxiproxyDump}`,
    );
  const ok = failures.length === 0;
  const report: SoakReport = {
    seed: o.seed,
    replay,
    startedAt,
    durationMs: o.durationMs,
    wallMs: Math.round(elapsed()),
    ok,
    failures,
    skipped,
    phases,
    scenario,
    resources: {
      intervalMs: resources.intervalMs,
      verdicts,
      series: [...resources.series.values()],
    },
  };
  const paths = writeSoakReport(o.reportDir, report);
  for (const line of scenarioLines(scenario)) w(`${line}\n`);
  for (const v of verdicts.filter((x) => !x.ok))
    w(`  VIOLATION: resources not flat: ${v.process} ${v.metric}: ${v.reason}\n`);
  w(
    ok
      ? `soak: held (seed ${o.seed}); report ${paths.markdown}\n`
      : `soak: VIOLATION (seed ${o.seed}; replay: ${replay}); report ${paths.markdown}\n`,
  );
  return { exitCode: ok ? 0 : 1, report };
}

const MIB = 1024 * 1024;
function fmtValue(metric: string, v: number | null): string {
  if (v === null) return "–";
  return metric === "sockets" ? String(v) : `${(v / MIB).toFixed(1)} MiB`;
}

/**
 * The first groups whose Σ shares exceeded U, each with what a reader needs
 * to tell a real overlap from a sampling one: every region's share, when its
 * view was taken (client clock), its Redis TIME less that instant (a stepped
 * clock shows as an offset), whether it was recovering, and the faults
 * active in the 5 s before.
 */
function shareViolationLines(r: SoakReport): string[] {
  const s = r.scenario;
  const out = ["## Σ shares above U (first groups)", ""];
  for (const v of s.shares.violations) {
    const at = v.atMs;
    out.push(`- at ${(at / 1000).toFixed(3)} s: Σ ${v.sumPpm} ppm`);
    v.shares.forEach((ppm, i) => {
      const t = v.atMsByRegion[i] ?? at;
      const offsetMs = (v.nowUs[i] ?? 0) / 1000 - t;
      out.push(
        `  - ${s.regions[i] ?? `region ${i}`}: ${ppm} ppm at ${(t / 1000).toFixed(3)} s, Redis TIME − client ${offsetMs.toFixed(0)} ms, Redis TIME ${v.nowUs[i] ?? 0} µs${v.recovering[i] ? ", recovering" : ""}${v.loans?.[i] ? `; loans: ${v.loans[i]}` : ""}`,
      );
    });
    const active = s.faults.filter((f) => f.injectedMs <= at && f.healedMs >= at - 5000);
    out.push(`  - faults active in the 5 s before: ${active.map((f) => f.label).join("; ") || "none"}`);
  }
  return out;
}

/** Markdown of a report: the verdict, the bound, the fault timeline, the resource table. */
export function soakMarkdown(r: SoakReport): string {
  const s = r.scenario;
  const b = s.bound;
  const lines = [
    `# Soak ${r.ok ? "held" : "FAILED"} (seed ${r.seed})`,
    "",
    `Started ${r.startedAt}; ${Math.round(r.durationMs / 1000)} s of traffic and faults (${Math.round(r.wallMs / 1000)} s with the cluster's start and the checks). Replay: \`${r.replay}\`.`,
    "",
    `- **Global bound (exact, every sub-interval of the whole run)**: admitted ${b.admitted} ${b.ok ? "≤" : ">"} bound ${fmtBound(b.bound)}` +
      (b.worstInterval
        ? `; tightest interval ${b.worstInterval.admitted} vs ${fmtBound(b.worstInterval.bound)} (${b.intervalsChecked} intervals checked)`
        : ""),
    `- **Σ shares**: max ${s.shares.maxSumPpm} ppm over ${s.shares.groupsChecked} sample groups (hottest share ${s.shares.maxRegionSharePpm} ppm)` +
      (s.shares.groupsExcluded > 0
        ? `; ${s.shares.groupsExcluded} groups in the windows after clock steps not checked (§1.2 assumes the clocks within 2ε)`
        : ""),
    `- **Requests**: ${s.requests.sent} sent, ${s.requests.answered} answered, ${s.requests.errors} unanswered, ${s.requests.shed} shed`,
    `- **Faults**: ${s.faults.length}; **hot region moves**: ${r.phases.length - 1}`,
    ...r.skipped.map((k) => `- **Skipped kind**: ${k}`),
    "",
  ];
  if (r.failures.length > 0) lines.push("## Failures", "", ...r.failures.map((f) => `- ${f}`), "");
  if (s.shares.violations.length > 0) lines.push(...shareViolationLines(r), "");
  lines.push("## Load", "", "| from (s) | hot | demand (req/s) |", "| --- | --- | --- |");
  for (const p of r.phases)
    lines.push(
      `| ${(p.atMs / 1000).toFixed(0)} | ${p.hot} | ${Object.entries(p.demand)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")} |`,
    );
  lines.push(
    "",
    "## Fault timeline",
    "",
    "| injected (s) | healed (s) | fault | links up after heal | converged after heal |",
    "| --- | --- | --- | --- | --- |",
  );
  const ms = (v: number | null) => (v === null ? "never" : `${Math.round(v)} ms`);
  for (const f of s.faults)
    lines.push(
      `| ${(f.injectedMs / 1000).toFixed(2)} | ${(f.healedMs / 1000).toFixed(2)} | ${f.label}${f.steps?.length ? ` (${f.steps.map((x) => `${x.what} ${(x.atMs / 1000).toFixed(3)}`).join("; ")})` : ""} | ${ms(f.linksUpMs)} | ${ms(f.convergenceMs)} |`,
    );
  lines.push(
    "",
    `## Resources (every ${r.resources.intervalMs} ms; flat: max of the last third ≤ 1.25 × max of the middle third + slack)`,
    "",
    "| process | metric | max warm-up | max middle | max last | limit | flat |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const v of r.resources.verdicts)
    lines.push(
      `| ${v.process} | ${v.metric} | ${fmtValue(v.metric, v.maxWarmup)} | ${fmtValue(v.metric, v.maxMiddle)} | ${fmtValue(v.metric, v.maxLast)} | ${fmtValue(v.metric, v.limit === null ? null : Math.round(v.limit))} | ${v.ok ? "yes" : `NO (${v.reason})`} |`,
    );
  return `${lines.join("\n")}\n`;
}

/** Writes `soak.json` and `soak.md` into `dir` (created). */
export function writeSoakReport(dir: string, r: SoakReport): { json: string; markdown: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, "soak.json");
  const markdown = join(dir, "soak.md");
  writeFileSync(json, `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(markdown, soakMarkdown(r));
  return { json, markdown };
}

/**
 * Takes Toxiproxy's goroutine dump (ending it) when a fault's call still got 503
 * after whileBusy's retries: the server is stuck, not slow. Returns the file.
 */
async function dumpIfStuck(
  cluster: Cluster,
  reportDir: string,
  failures: readonly string[],
): Promise<string | undefined> {
  if (!cluster.toxiproxy || !failures.some((f) => /status code 503\b/.test(f))) return undefined;
  mkdirSync(reportDir, { recursive: true });
  const file = join(reportDir, "toxiproxy-goroutines.txt");
  return (await cluster.toxiproxy.server.dumpGoroutines(file)) ? file : undefined;
}
