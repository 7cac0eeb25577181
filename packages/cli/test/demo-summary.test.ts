import { type Admission, checkGlobalBound } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { OUTCOME, RequestLog } from "../src/demo/request-log.js";
import {
  boundLines,
  fmtBound,
  shareReachedAfter,
  utilization,
  utilizationLine,
} from "../src/demo/summary.js";

const limit = { capacity: 1000, refillPerSecond: 1000 / 60 };

/** `n` admissions of cost 1, evenly spaced over [0, spanMs], each answered 2 ms after it was sent. */
function evenAdmissions(n: number, spanMs: number): Admission[] {
  return Array.from({ length: n }, (_, i) => {
    const s = (i * spanMs) / Math.max(1, n - 1);
    return { sentMs: s, answeredMs: s + 2, cost: 1 };
  });
}

describe("boundLines", () => {
  it("prints the exact held wording with both numbers", () => {
    const v = checkGlobalBound(evenAdmissions(1500, 30_000), limit);
    expect(v.ok).toBe(true);
    const lines = boundLines(v, 0);
    expect(lines[0]).toMatch(/^global bound held: admitted 1500 ≤ bound \d+\.\d\d$/);
    expect(lines[0]).toBe(`global bound held: admitted 1500 ≤ bound ${fmtBound(v.bound)}`);
    expect(lines[1]).toMatch(/^ {2}tightest interval \[/);
  });

  it("prints the exact VIOLATED wording with the worst interval", () => {
    // 1100 admissions inside one second: the bound of that second is 1000 + r·1 s.
    const v = checkGlobalBound(evenAdmissions(1100, 1000), limit);
    expect(v.ok).toBe(false);
    const lines = boundLines(v, 0);
    expect(lines[0]).toMatch(/^global bound VIOLATED: admitted \d+ > bound \d+\.\d\d$/);
    const [, x, y] = /admitted (\d+) > bound ([\d.]+)/.exec(lines[0]!)!;
    expect(Number(x)).toBeGreaterThan(Number(y));
    expect(lines[1]).toMatch(/^ {2}worst interval \[\d+\.\d\ds, \d+\.\d\ds\]: over by/);
  });

  it("rounds the printed bound down, so a printed 'held' line is itself true", () => {
    expect(fmtBound(1499.999)).toBe("1499.99");
    expect(Number(fmtBound(2500))).toBe(2500);
  });

  it("gives a side key that held one short line, and a violated one the full verdict", () => {
    const side = { capacity: 10, refillPerSecond: 1 / 6 };
    expect(boundLines(checkGlobalBound([], side), 0, "  cust_free_1018/payments_checkout")).toEqual([
      "  cust_free_1018/payments_checkout: held too, admitted 0 ≤ bound 10.00",
    ]);
    const bad = boundLines(checkGlobalBound(evenAdmissions(20, 1000), side), 0, "  k");
    expect(bad[0]).toMatch(/^ {2}k: global bound VIOLATED: admitted 20 > bound 10\.\d\d$/);
  });
});

describe("utilization", () => {
  it("measures the admitted rate after the ramp as a fraction of r, and when it settled", () => {
    const log = new RequestLog(10_000);
    // 0–3 s: 5/s (a third of r); 3–20 s: 16/s (96% of r).
    for (let t = 0; t < 20_000; t += 1) {
      const every = t < 3000 ? 200 : 62.5;
      if (t % every < 1)
        log.push({ sentMs: t, answeredMs: t + 1, region: 0, key: 0, outcome: OUTCOME.allowed, cost: 1 });
    }
    const u = utilization(log, 0, limit.refillPerSecond, 0, 20_000, 5000);
    expect(u.ratio).toBeGreaterThan(0.9);
    expect(u.ratio).toBeLessThan(1);
    expect(u.settledAfterMs).not.toBeNull();
    // The first trailing 3 s window at ≥ 15/s starts a little before 3 s (the 5/s head counts too).
    expect(u.settledAfterMs!).toBeGreaterThanOrEqual(2000);
    expect(u.settledAfterMs!).toBeLessThanOrEqual(3000);
    expect(utilizationLine(u, "us-east", limit.refillPerSecond, 2500)).toMatch(
      /^utilization during shift \(demand all in us-east\): admitted \d+\.\d\d\/s of r = 16\.67\/s = \d+\.\d% \(sustained ≥ 90% of r from \d+\.\ds after the shift; us-east's share reached 90% 2\.5s after the shift\)$/,
    );
  });

  it("finds when the hot region's polled share first reached 90%", () => {
    const samples = [0, 500, 1000, 1500, 2000].map((tMs, i) => ({
      tMs,
      regions: {
        "us-east": { sharePpm: [333_333, 500_000, 899_999, 930_000, 960_000][i]! },
        "eu-west": null,
      },
    }));
    expect(shareReachedAfter(samples, "us-east", 0, 2000)).toBe(1500);
    expect(shareReachedAfter(samples, "us-east", 0, 1000)).toBeNull();
    expect(shareReachedAfter(samples, "eu-west", 0, 2000)).toBeNull();
  });
});
