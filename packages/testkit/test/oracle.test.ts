import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Admission, checkGlobalBound } from "../src/index.js";

const limit = { capacity: 10, refillPerSecond: 2 };

describe("global-bound oracle", () => {
  it("accepts a burst of exactly C then exactly r per second", () => {
    const adm: Admission[] = [];
    for (let i = 0; i < 10; i++) adm.push({ sentMs: 0, answeredMs: 1, cost: 1 });
    for (let s = 1; s <= 5; s++) adm.push({ sentMs: s * 500, answeredMs: s * 500 + 1, cost: 1 });
    // 15 admitted over [0, 2501]: bound 10 + 2·2.501 = 15.002
    expect(checkGlobalBound(adm, limit).ok).toBe(true);
  });

  it("catches one admission over the bound, whole-run and in a sub-interval", () => {
    const adm: Admission[] = [];
    for (let i = 0; i < 11; i++) adm.push({ sentMs: 0, answeredMs: 1, cost: 1 });
    const v = checkGlobalBound(adm, limit);
    expect(v.ok).toBe(false);
    expect(v.worstExcess).toBeGreaterThan(0.9);

    // Inside a long run the whole-run bound holds, only a sub-interval breaks.
    const long: Admission[] = [{ sentMs: 0, answeredMs: 1, cost: 1 }];
    for (let i = 0; i < 11; i++) long.push({ sentMs: 100_000, answeredMs: 100_001, cost: 1 });
    long.push({ sentMs: 200_000, answeredMs: 200_001, cost: 1 });
    const w = checkGlobalBound(long, limit);
    expect(w.admitted).toBeLessThan(w.bound);
    expect(w.ok).toBe(false);
    expect(w.worstInterval).toMatchObject({ startMs: 100_000, endMs: 100_001, admitted: 11 });
  });

  it("has no tolerance: C + 0.001 over is a violation", () => {
    const v = checkGlobalBound([{ sentMs: 0, answeredMs: 0, cost: 10.001 }], limit);
    expect(v.ok).toBe(false);
  });

  it("agrees with a brute-force check over all (send, answer) interval pairs", () => {
    const admission = fc.record({
      sentMs: fc.integer({ min: 0, max: 5000 }),
      latencyMs: fc.integer({ min: 0, max: 300 }),
      cost: fc.integer({ min: 1, max: 4 }),
    });
    fc.assert(
      fc.property(fc.array(admission, { maxLength: 40 }), (raw) => {
        const adm = raw.map((a) => ({ sentMs: a.sentMs, answeredMs: a.sentMs + a.latencyMs, cost: a.cost }));
        let brute = true;
        for (const s of adm)
          for (const e of adm) {
            if (e.answeredMs < s.sentMs) continue;
            const inside = adm
              .filter((a) => a.sentMs >= s.sentMs && a.answeredMs <= e.answeredMs)
              .reduce((x, a) => x + a.cost, 0);
            if (inside > limit.capacity + (limit.refillPerSecond / 1000) * (e.answeredMs - s.sentMs) + 1e-9)
              brute = false;
          }
        expect(checkGlobalBound(adm, limit).ok).toBe(brute);
      }),
      { numRuns: 300 },
    );
  });
});
