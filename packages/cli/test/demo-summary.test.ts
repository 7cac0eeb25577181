import { type Admission, checkGlobalBound } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { OUTCOME, RequestLog } from "../src/demo/request-log.js";
import {
  boundLines,
  fmtBound,
  shareReachedAfter,
  streamBoundLines,
  streamRate,
  streamRateLine,
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
  it("measures the admitted rate after the ramp as a fraction of r", () => {
    const log = new RequestLog(10_000);
    // 0–3 s: a burst of 300 (tokens held before the shift); 3–20 s: 16/s (96% of r).
    for (let i = 0; i < 300; i++)
      log.push({
        sentMs: i * 10,
        answeredMs: i * 10 + 1,
        region: 0,
        key: 0,
        outcome: OUTCOME.allowed,
        cost: 1,
      });
    for (let t = 3000; t < 20_000; t += 62.5)
      log.push({ sentMs: t, answeredMs: t + 1, region: 0, key: 0, outcome: OUTCOME.allowed, cost: 1 });
    // A denied request and another key's admission do not count.
    log.push({ sentMs: 9000, answeredMs: 9001, region: 0, key: 0, outcome: OUTCOME.denied, cost: 1 });
    log.push({ sentMs: 9000, answeredMs: 9001, region: 0, key: 1, outcome: OUTCOME.allowed, cost: 1 });
    const u = utilization(log, 0, limit.refillPerSecond, 0, 20_000, 10_000);
    expect(u.admittedPerSec).toBe(16); // 160 admissions in [10 s, 20 s]: the burst is excluded
    expect(u.ratio).toBeCloseTo(0.96, 10);
    expect(utilizationLine(u, "us-east", limit.refillPerSecond, 2500)).toBe(
      "utilization during shift (demand all in us-east): admitted 16.00/s of r = 16.67/s = 96.0% " +
        "(measured 10.0s from 10.0s after the shift; us-east's share reached 90% of U 2.5s after the shift)",
    );
    expect(utilizationLine(u, "us-east", limit.refillPerSecond, null)).toContain("never reached 90% of U");
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

describe("stream summary", () => {
  const bytes = { capacity: 262_144, refillPerSecond: 262_144 };
  /** 4 KiB frames evenly over [0, spanMs], read 1 ms before delivery, round-robin over 3 regions. */
  function frames(n: number, spanMs: number) {
    return Array.from({ length: n }, (_, i) => {
      const t = (i * spanMs) / Math.max(1, n - 1);
      return { region: i % 3, sentMs: t, answeredMs: t + 1, bytes: 4096 };
    });
  }
  const adm = (f: ReturnType<typeof frames>) =>
    f.map((x) => ({ sentMs: x.sentMs, answeredMs: x.answeredMs, cost: x.bytes }));

  it("prints the fixed held wording in bytes, with the tightest interval", () => {
    // 10 s at r: C + r·10 s = 11 × 256 KiB; send 10 × 256 KiB worth.
    const v = checkGlobalBound(adm(frames(640, 10_000)), bytes);
    expect(v.ok).toBe(true);
    const lines = streamBoundLines(v, 0);
    expect(lines[0]).toBe(`stream bound held: admitted 2621440 B ≤ bound ${fmtBound(v.bound)} B`);
    expect(lines[0]).toMatch(/^stream bound held: admitted \d+ B ≤ bound \d+\.\d\d B$/);
    expect(lines[1]).toMatch(
      /^ {2}tightest interval \[\d+\.\d\ds, \d+\.\d\ds\]: admitted \d+ B ≤ bound [\d.]+ B \(margin [\d.]+ B; \d+ intervals checked\)$/,
    );
  });

  it("prints the fixed VIOLATED wording with the worst interval", () => {
    // 640 KiB within one second: more than C + r·1 s = 512 KiB.
    const v = checkGlobalBound(adm(frames(160, 1000)), bytes);
    expect(v.ok).toBe(false);
    const lines = streamBoundLines(v, 0);
    expect(lines[0]).toMatch(/^stream bound VIOLATED: admitted \d+ B > bound \d+\.\d\d B$/);
    expect(lines[1]).toMatch(/^ {2}worst interval \[[\d.]+s, [\d.]+s\]: over by [\d.]+ B \(whole run/);
    expect(streamBoundLines(checkGlobalBound([], bytes), 0)).toEqual([
      "stream bound held: admitted 0 B ≤ bound 262144.00 B",
    ]);
  });

  it("measures the sustained streamed rate after the burst as a fraction of r, per region", () => {
    // A burst of 64 frames in the first 100 ms, then 48 frames/s (192 KiB/s = 75% of r) to 10 s.
    const f = [
      ...Array.from({ length: 64 }, (_, i) => ({ region: 0, sentMs: i, answeredMs: i + 1, bytes: 4096 })),
      ...Array.from({ length: 432 }, (_, i) => {
        const t = 1000 + (i * 9000) / 432 + 1;
        return { region: i % 3 === 0 ? 0 : 1, sentMs: t - 1, answeredMs: t, bytes: 4096 };
      }),
    ];
    const s = streamRate(f, 3, bytes.refillPerSecond, 0, 10_000, 2000);
    expect(s.fromMs).toBe(2000);
    expect(s.ratio).toBeGreaterThan(0.74);
    expect(s.ratio).toBeLessThan(0.76);
    expect(s.regionFractions[0]! + s.regionFractions[1]! + s.regionFractions[2]!).toBeCloseTo(1, 10);
    expect(s.regionFractions[2]).toBe(0);
    const line = streamRateLine(s, ["us-east", "eu-west", "ap-south"], bytes.refillPerSecond, 10);
    expect(line).toMatch(
      /^stream rate: \d+ B\/s of r = 262144 B\/s = 7\d\.\d% while each of 3 clients offered 10× r \(measured 8\.0s from 2\.0s after the start; us-east 3\d%, eu-west 6\d%, ap-south 0%\)$/,
    );
  });
});
