// The oracle is not vacuous: three independent 1-region clusters, each
// enforcing the full global limit for the same tenant (the seed's fallback),
// get traffic together; the same exact oracle the chaos scenarios use must
// report the overshoot.
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import { expect, it } from "vitest";
import { CHAOS_POLICIES, CHAOS_RESOURCE } from "../../packages/cli/src/chaos/cluster.js";
import { runUnsafeControl } from "../../packages/cli/src/chaos/unsafe.js";
import { startCluster } from "../../packages/cli/src/cluster/orchestrator.js";

it("three independent regions, each with the full limit, overshoot and the oracle says so", async () => {
  const spec = lookupPolicy(loadPolicies(CHAOS_POLICIES), "probe", CHAOS_RESOURCE);
  const limit = { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
  const verdict = await runUnsafeControl({
    startCluster,
    durationMs: 4000,
    tenant: `unsafe-${Date.now() % 1_000_000}`,
    limit,
  });
  expect(verdict.ok).toBe(false);
  // Each cluster admits its full burst: the overshoot is about (n − 1)·C at least.
  expect(verdict.worstExcess).toBeGreaterThan(limit.capacity);
}, 180_000);
