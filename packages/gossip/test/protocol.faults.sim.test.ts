// The same whole-protocol simulation of the production daemon with every
// fault at its worst (30% drop and duplication, up to 900 ms latency,
// frequent partitions, two state losses, two daemon restarts, two failovers
// with the daemon down around them, some ending a replica stall, a policy
// change). A separate file so
// vitest runs it beside protocol.sim.test.ts. Replay a failure with
// GQ_SEED=<n> pnpm exec vitest run --project gossip protocol.faults.sim.
import { runSeedsAsync } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import { type FaultOptions, runModel, scenarioFor } from "../src/model/index.js";

describe("whole protocol, harsh faults", () => {
  it("stays safe with every fault at its worst", async () => {
    await runSeedsAsync(
      "protocol sim (harsh)",
      { count: HARSH_SEEDS, firstSeed: 1_000_001 },
      async (seed) => {
        const base = scenarioFor(seed);
        const faults: FaultOptions = {
          ...base.faults,
          dropRate: 0.3,
          duplicateRate: 0.3,
          latencyMinUs: 1_000,
          latencyMaxUs: 900_000,
          partitionEveryUs: 2_000_000,
          stateLosses: 2,
          daemonRestarts: 2,
          failovers: 2,
          daemonDownAtFailoverUs: 2_000_000,
          policyChanges: 1,
        };
        const r = await runModel({ ...base, faults, maxCost: 3 });
        if (!r.ok) throw new Error(r.failure);
        expect(r.worstShareExcess).toBeLessThanOrEqual(0);
      },
    );
  }, 600_000);
});

const HARSH_SEEDS = 100;
