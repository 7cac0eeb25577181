// The same whole-protocol simulation with every fault at its worst (30% drop
// and duplication, up to 900 ms latency, frequent partitions, two state
// losses and two daemon restarts per run). A separate file so vitest runs it
// beside protocol.sim.test.ts. Replay a failure with GQ_SEED=<n>.
import { runSeeds } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import { type FaultOptions, runModel, scenarioFor } from "../src/model/index.js";

describe("whole protocol, harsh faults", () => {
  it("stays safe with every fault at its worst", () => {
    runSeeds("protocol sim (harsh)", { count: 800, firstSeed: 1_000_001, longCount: 6_000 }, (seed) => {
      const base = scenarioFor(seed);
      const faults: FaultOptions = {
        dropRate: 0.3,
        duplicateRate: 0.3,
        latencyMinUs: 1_000,
        latencyMaxUs: 900_000,
        partitionEveryUs: 2_000_000,
        stateLosses: 2,
        daemonRestarts: 2,
      };
      const r = runModel({ ...base, faults, maxCost: 3 });
      if (!r.ok) throw new Error(r.failure);
      expect(r.worstShareExcess).toBeLessThanOrEqual(0);
    });
  }, 240_000);
});
