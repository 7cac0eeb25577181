// The oracle is not vacuous: three independent 1-region clusters, each
// enforcing the full global limit for the same tenant (the seed's fallback),
// get traffic together; the same exact oracle and Σ-shares check the chaos
// scenarios use must report the overshoot.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import { repoRoot } from "@geoquota/testkit";
import { expect, it } from "vitest";
import { CHAOS_POLICIES, CHAOS_RESOURCE } from "../../packages/cli/src/chaos/cluster.js";
import { runUnsafeControl } from "../../packages/cli/src/chaos/unsafe.js";
import { startCluster } from "../../packages/cli/src/cluster/orchestrator.js";

it("three independent regions, each with the full limit, overshoot and the oracle says so", async () => {
  const spec = lookupPolicy(loadPolicies(CHAOS_POLICIES), "probe", CHAOS_RESOURCE);
  const limit = { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
  const { bound, shares } = await runUnsafeControl({
    startCluster,
    // At least 4 s; longer while a loaded machine has not yet shown the overshoot (see unsafe.ts).
    durationMs: 4000,
    maxDurationMs: 90_000,
    tenant: `unsafe-${Date.now() % 1_000_000}`,
    limit,
  });
  mkdirSync(join(repoRoot, "reports"), { recursive: true });
  writeFileSync(
    join(repoRoot, "reports", "chaos-unsafe.json"),
    `${JSON.stringify({ bound, shares }, null, 2)}\n`,
  );
  expect(bound.ok).toBe(false);
  // Each cluster admits its full burst: the overshoot is about (n − 1)·C at least.
  expect(bound.worstExcess).toBeGreaterThan(limit.capacity);
  // And the Σ-shares check sees three regions each holding all of U.
  expect(shares.ok).toBe(false);
  expect(shares.maxSumPpm).toBe(3_000_000);
}, 300_000);
