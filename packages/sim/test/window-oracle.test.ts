// The simulation's exact G1 oracle (incremental, O(1) per admission) against
// brute force over every pair of admissions.
import { describe, expect, it } from "vitest";
import { bruteForceExcess, Rng, WindowOracle } from "../src/index.js";

describe("the exact G1 oracle", () => {
  it("agrees with brute force over all windows", () => {
    const rng = new Rng(7);
    for (let trial = 0; trial < 200; trial++) {
      const adm: { atUs: number; cost: number }[] = [];
      let t = 0;
      for (let i = 0; i < 40; i++) {
        // Some admissions share an instant.
        t += rng.chance(1 / 3) ? 0 : rng.int(0, 199_999);
        adm.push({ atUs: t, cost: rng.int(1, 3) });
      }
      const o = new WindowOracle(5, 10);
      for (const a of adm) o.admit(a.atUs, a.cost);
      expect(o.worstExcessScaled).toBe(bruteForceExcess(adm, 5, 10));
      expect(o.violation === undefined).toBe(bruteForceExcess(adm, 5, 10) <= 0);
    }
  });

  it("refuses non-integer limits (it stays exact only on integers)", () => {
    expect(() => new WindowOracle(1.5, 10)).toThrow(/integer C and r/);
  });
});
