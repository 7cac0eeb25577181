// `geoquota chaos` end to end: one fresh local cluster shared by every
// scenario of the run (a fresh tenant each, Toxiproxy reset between them),
// a verdict line per scenario, the JSON report, and an exit code (1 on any
// violation). `--scenario random` with a long --duration is the soak: it
// repeats randomized scenarios (a new sub-seed and tenant per round, so the
// O(n²) oracle stays small) until the duration is used up.
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import type { Writer } from "../demo/types.js";
import { CHAOS_RESOURCE, chaosClusterOptions, chaosTopology, prepareCluster } from "./cluster.js";
import { type ChaosReport, scenarioLines, writeChaosReport } from "./report.js";
import { Rng, subSeed } from "@geoquota/sim";
import { runScenario, type ScenarioResult } from "./run-scenario.js";
import { planScenario, SCENARIO_NAMES, type ScenarioName } from "./scenarios.js";

export interface ChaosOptions {
  readonly seed: number;
  /** Per scenario; for `random`, the whole soak. */
  readonly durationMs: number;
  readonly scenario: ScenarioName | "all";
  readonly reportPath: string;
  readonly write: Writer;
  readonly startCluster: (o: ClusterOptions) => Promise<Cluster>;
  readonly signal?: AbortSignal;
}

/** One soak round of `random` lasts at most this long. */
const SOAK_ROUND_MS = 60_000;

export async function runChaos(o: ChaosOptions): Promise<{ exitCode: number; report: ChaosReport }> {
  const w = o.write;
  const topology = chaosTopology(3);
  w(`chaos seed ${o.seed} (replay: --seed ${o.seed})\n`);
  w("starting a local cluster (3 regions, gossip and Redis links behind Toxiproxy)…\n");
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const cluster = await o.startCluster(chaosClusterOptions(topology));
  const results: ScenarioResult[] = [];
  try {
    const ids = cluster.regions.map((r) => r.id);
    const spec = lookupPolicy(loadPolicies(cluster.policiesPath, ids), "probe", CHAOS_RESOURCE);
    const limit = { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
    const runs: Array<{ name: ScenarioName; seed: number; durationMs: number }> = [];
    if (o.scenario === "all")
      for (const name of SCENARIO_NAMES) runs.push({ name, seed: o.seed, durationMs: o.durationMs });
    else if (o.scenario !== "random") runs.push({ name: o.scenario, seed: o.seed, durationMs: o.durationMs });
    const soakEnd = performance.now() + o.durationMs;
    for (let round = 0; ; round++) {
      let next = runs[round];
      if (o.scenario === "random") {
        const left = soakEnd - performance.now();
        if (left < 5000 && round > 0) break;
        next = {
          name: "random",
          seed: round === 0 ? o.seed : subSeed(o.seed, `round${round}`),
          durationMs: Math.max(5000, Math.min(SOAK_ROUND_MS, left)),
        };
      }
      if (!next || o.signal?.aborted) break;
      await prepareCluster(cluster, new Rng(subSeed(next.seed, `prepare${round}`)));
      const plan = planScenario(next.name, next.seed, {
        regionIds: ids,
        leasedRegion: topology.leasedRegion,
      });
      const res = await runScenario({
        cluster,
        plan,
        tenant: `chaos-${next.name}-${next.seed}-${round}`,
        durationMs: next.durationMs,
        limit,
        leasedRegion: topology.leasedRegion,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      results.push(res);
      for (const line of scenarioLines(res)) w(`${line}\n`);
    }
  } finally {
    await cluster.stop();
  }
  const ok = results.length > 0 && results.every((r) => r.ok);
  const report: ChaosReport = {
    seed: o.seed,
    startedAt,
    durationMs: Math.round(performance.now() - t0),
    ok,
    scenarios: results,
  };
  writeChaosReport(o.reportPath, report);
  const failed = results.filter((r) => !r.ok).map((r) => r.name);
  w(
    ok
      ? `chaos: all ${results.length} scenarios held (seed ${o.seed}); report ${o.reportPath}\n`
      : `chaos: VIOLATION in ${failed.join(", ") || "no scenario ran"} (seed ${o.seed}); report ${o.reportPath}\n`,
  );
  return { exitCode: ok ? 0 : 1, report };
}
