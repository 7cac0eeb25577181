import { describe, expect, it } from "vitest";
import {
  assertCheck,
  CheckFailure,
  checkAgainstOracle,
  checkAll,
  checkConvergence,
  isLongMode,
  runSeeds,
  runSeedsAsync,
  SeedFailure,
  seedsToRun,
} from "../src/index.js";

describe("seeds", () => {
  it("runs count seeds normally, longCount in long mode, one seed on replay", () => {
    expect(seedsToRun({ count: 3, env: {} })).toEqual([1, 2, 3]);
    expect(seedsToRun({ count: 3, firstSeed: 10, env: {} })).toEqual([10, 11, 12]);
    expect(seedsToRun({ count: 3, longCount: 5, env: { GQ_SIM_LONG: "1" } })).toHaveLength(5);
    expect(seedsToRun({ count: 3, env: { GQ_SIM_LONG: "1" } })).toHaveLength(60);
    expect(seedsToRun({ count: 3, env: { GQ_SEED: "1234", GQ_SIM_LONG: "1" } })).toEqual([1234]);
    expect(isLongMode({ GQ_SIM_LONG: "0" })).toBe(false);
    expect(() => seedsToRun({ count: 1, env: { GQ_SEED: "x" } })).toThrow(/GQ_SEED/);
  });

  it("names the failing seed and the replay variable in the error", () => {
    const seen: number[] = [];
    let err: unknown;
    try {
      runSeeds("demo", { count: 10, env: {} }, (seed) => {
        seen.push(seed);
        if (seed === 4) throw new Error("boom");
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SeedFailure);
    expect((err as SeedFailure).seed).toBe(4);
    expect((err as Error).message).toMatch(/demo failed with seed 4; replay with GQ_SEED=4\nboom/);
    expect(seen).toEqual([1, 2, 3, 4]);
    expect(runSeeds("ok", { count: 5, env: {} }, () => {})).toBe(5);
  });

  it("runs an async body seed after seed and names the failing seed", async () => {
    const seen: number[] = [];
    let inFlight = 0;
    const err = await runSeedsAsync("async demo", { count: 10, env: {} }, async (seed) => {
      inFlight++;
      expect(inFlight).toBe(1);
      await Promise.resolve();
      seen.push(seed);
      inFlight--;
      if (seed === 3) throw new Error("bang");
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SeedFailure);
    expect((err as Error).message).toMatch(/async demo failed with seed 3; replay with GQ_SEED=3\nbang/);
    expect(seen).toEqual([1, 2, 3]);
    expect(await runSeedsAsync("ok", { count: 4, env: { GQ_SEED: "77" } }, async () => {})).toBe(1);
  });
});

describe("checkers", () => {
  const cmp = { equals: (a: number, b: number) => a === b, describe: (s: number) => `n=${s}` };

  it("detect divergence and oracle mismatch", () => {
    expect(
      checkConvergence(
        new Map([
          ["a", 1],
          ["b", 1],
        ]),
        cmp,
      ),
    ).toEqual({ ok: true });
    const bad = checkConvergence([["a", 1] as const, ["b", 2] as const], cmp);
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.message).toMatch(/a and b did not converge[\s\S]*n=2/);
    expect(checkAgainstOracle(new Map([["a", 1]]), 2, cmp).ok).toBe(false);
    expect(checkAll({ ok: true }, bad)).toBe(bad);
    expect(() => assertCheck(bad)).toThrow(CheckFailure);
    expect(() => assertCheck({ ok: true })).not.toThrow();
  });
});
