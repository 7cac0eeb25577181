// Replica simulation (see scenario.ts). Replay a failure with GQ_SEED=<seed>;
// GQ_SIM_LONG=1 runs 50 000 seeds.
import { assertCheck, runSeeds } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import { KeyRecord } from "../src/index.js";
import { type MergeKeyInto, runScenario } from "./scenario.js";

describe("simulation: replicas converge once the network heals", () => {
  it("for thousands of seeds under drop, duplicate, reorder, delay and partitions", () => {
    const n = runSeeds("crdt convergence", { count: 2_000, longCount: 50_000 }, (seed) =>
      assertCheck(runScenario(seed)),
    );
    expect(n).toBeGreaterThanOrEqual(1);
  });

  it("catches a broken join (sum instead of max): the oracle is not vacuous", () => {
    // Sums counter entries instead of taking the max: duplicates and relays inflate.
    const brokenMerge: MergeKeyInto = (map, key, record) => {
      const cur = map.get(key);
      if (cur === undefined) {
        map.set(key, KeyRecord.copy(record));
        return true;
      }
      for (const [r, v] of record.consumed.p) cur.consumed.p.set(r, (cur.consumed.p.get(r) ?? 0) + v);
      return record.consumed.p.size > 0 || KeyRecord.mergeInto(cur, record);
    };
    let failed = 0;
    let messages = "";
    const seeds = 30;
    for (let seed = 1; seed <= seeds; seed++) {
      const r = runScenario(seed, { mergeKeyInto: brokenMerge, healDeadlineUs: 1_000_000 });
      if (!r.ok) {
        failed++;
        messages = r.message;
      }
    }
    expect(failed).toBeGreaterThan(seeds * 0.8);
    expect(messages).toMatch(/differs from the oracle|did not converge/);
  });

  it("a failing run names its seed and the replay variable", () => {
    expect(() =>
      runSeeds("broken", { count: 3, env: {} }, (seed) => {
        throw new Error(`fail ${seed}`);
      }),
    ).toThrow(/seed 1; replay with GQ_SEED=1/);
  });
});
