// The chaos tier: every scenario of packages/cli/src/chaos against ONE real
// 3-region cluster (real redis-server, limiter and gossip processes, every
// link through the real Toxiproxy with WAN latency), a fresh tenant each,
// Toxiproxy reset in between. Short profile: GQ_CHAOS_DURATION_MS per
// scenario (default 9 s). GQ_CHAOS_SEED replays a seed. Each run's figures go
// to reports/chaos-tier.json (no console output: the hygiene setup fails it).
import { join } from "node:path";
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import { repoRoot } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CHAOS_RESOURCE,
  chaosClusterOptions,
  chaosTopology,
  prepareCluster,
} from "../../packages/cli/src/chaos/cluster.js";
import { scenarioLines, writeChaosReport } from "../../packages/cli/src/chaos/report.js";
import { Rng, subSeed } from "@geoquota/sim";
import { runScenario, type ScenarioResult } from "../../packages/cli/src/chaos/run-scenario.js";
import { planScenario, SCENARIO_NAMES } from "../../packages/cli/src/chaos/scenarios.js";
import { type Cluster, startCluster } from "../../packages/cli/src/cluster/orchestrator.js";

const SEED = Number(process.env.GQ_CHAOS_SEED ?? 7_2024);
const DURATION_MS = Number(process.env.GQ_CHAOS_DURATION_MS ?? 9000);
const topology = chaosTopology(3);
let cluster: Cluster;
const results: ScenarioResult[] = [];
const startedMs = performance.now();

beforeAll(async () => {
  cluster = await startCluster(chaosClusterOptions(topology));
}, 180_000);

afterAll(async () => {
  await cluster?.stop();
  writeChaosReport(join(repoRoot, "reports", "chaos-tier.json"), {
    seed: SEED,
    startedAt: new Date().toISOString(),
    durationMs: Math.round(performance.now() - startedMs),
    ok: results.every((r) => r.ok),
    scenarios: results,
  });
}, 60_000);

describe(`chaos scenarios (seed ${SEED}, ${DURATION_MS} ms each)`, () => {
  for (const name of SCENARIO_NAMES) {
    it(
      name,
      async () => {
        const ids = cluster.regions.map((r) => r.id);
        const spec = lookupPolicy(loadPolicies(cluster.policiesPath, ids), "probe", CHAOS_RESOURCE);
        await prepareCluster(cluster, new Rng(subSeed(SEED, `prepare-${name}`)));
        const plan = planScenario(name, SEED, { regionIds: ids, leasedRegion: topology.leasedRegion });
        const res = await runScenario({
          cluster,
          plan,
          tenant: `chaos-${name}-${SEED}-${Date.now() % 1_000_000}`,
          durationMs: DURATION_MS,
          limit: { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond },
          leasedRegion: topology.leasedRegion,
        });
        results.push(res);
        // Not vacuous: traffic was admitted, shares were compared, every fault ran.
        expect(res.bound.admitted).toBeGreaterThan(0);
        expect(res.shares.groupsChecked).toBeGreaterThan(0);
        expect(res.faults.length).toBeGreaterThan(0);
        for (const f of res.faults) expect(Number.isFinite(f.injectedMs)).toBe(true);
        // The failures carry the seed and the evidence; an empty list is the pass.
        expect(res.failures, scenarioLines(res).join("\n")).toEqual([]);
      },
      DURATION_MS + 60_000,
    );
  }
});
