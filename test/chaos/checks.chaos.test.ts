// The chaos checks themselves, on synthetic records: each must catch a
// planted fault (or the tier could pass vacuously), and must not invent one
// from samples that were only taken at slightly different instants.
import { describe, expect, it } from "vitest";
import {
  checkFailClosed,
  checkShareSum,
  clockStepWindows,
  convergenceAfter,
  convergenceLateness,
  quietFrom,
} from "../../packages/cli/src/chaos/checks.js";
import { FAULT_CLASS } from "../../packages/cli/src/chaos/faults.js";
import type { QuotaSample } from "../../packages/cli/src/chaos/sampler.js";
import { planScenario, SCENARIO_NAMES } from "../../packages/cli/src/chaos/scenarios.js";

const sample = (region: number, nowMs: number, sharePpm: number, counters: Record<string, number> = {}) =>
  ({
    region,
    tMs: nowMs,
    answeredMs: nowMs + 1,
    nowUs: nowMs * 1000,
    sharePpm,
    recovering: false,
    counters: new Map(Object.entries(counters)),
  }) satisfies QuotaSample;

describe("Σ shares ≤ U", () => {
  it("flags a group within the pairing window whose shares sum above U", () => {
    const v = checkShareSum([sample(0, 100, 500_000), sample(1, 105, 400_000), sample(2, 110, 200_000)], 3, {
      maxSpreadMs: 30,
    });
    expect(v.ok).toBe(false);
    expect(v.maxSumPpm).toBe(1_100_000);
  });

  it("does not pair a lender's sample from before a grant with the borrower's from after it", () => {
    // The lender gave 300 000 at t=100 ms; the borrower got it 40 ms later (one WAN hop).
    const v = checkShareSum(
      [
        sample(0, 90, 333_333), // lender before the grant
        sample(0, 150, 33_333),
        sample(1, 145, 633_333), // borrower after the loan arrived
        sample(2, 92, 333_334),
        sample(2, 148, 333_334),
      ],
      3,
      { maxSpreadMs: 30 },
    );
    expect(v.ok).toBe(true);
    expect(v.maxSumPpm).toBe(1_000_000);
    expect(v.groupsSkipped).toBeGreaterThan(0);
  });

  it("pairs samples on the client's clock, not on a Redis TIME that was stepped", () => {
    // Weights move from 1:1:1 to 2:3:2 at t=1000 ms; region 0's Redis clock runs 776 ms
    // behind (a soak's clock step), so its nowUs after the change read like the others'
    // before it. Paired by nowUs that made 428 572 + 333 333 + 333 334 > U (seed 26005).
    const stepped = (region: number, tMs: number, sharePpm: number, offsetMs: number) => ({
      ...sample(region, tMs, sharePpm),
      nowUs: (tMs + offsetMs) * 1000,
    });
    const samples: QuotaSample[] = [];
    for (let t = 0; t < 2000; t += 40) {
      const before = t < 1000;
      samples.push(stepped(0, t, before ? 333_333 : 285_714, -776));
      samples.push(stepped(1, t + 2, before ? 333_333 : 428_572, 0));
      samples.push(stepped(2, t + 3, before ? 333_334 : 285_714, 0));
    }
    const v = checkShareSum(samples, 3, { maxSpreadMs: 30 });
    expect(v.ok, JSON.stringify(v.violations)).toBe(true);
    expect(v.maxSumPpm).toBe(1_000_000);
    expect(v.groupsChecked).toBe(samples.length);
    // And an overshoot at one real instant is still caught, whatever the Redis clocks read.
    samples.push(stepped(0, 1500, 400_000, -776));
    expect(checkShareSum(samples, 3, { maxSpreadMs: 30 }).ok).toBe(false);
  });

  it("does not check groups in a window after a clock step, and keeps the largest sums", () => {
    // Soak seed 2630: a lender's clock stepped ahead freed a loan's reservation early.
    const samples = [
      sample(0, 100, 200_000),
      sample(1, 105, 110_000),
      sample(2, 110, 720_000),
      sample(0, 5000, 300_000),
      sample(1, 5005, 350_000),
      sample(2, 5010, 400_000),
    ];
    const all = checkShareSum(samples, 3, { maxSpreadMs: 30 });
    expect(all.ok).toBe(false);
    expect(all.violations[0]!.sumPpm).toBe(1_050_000);
    const v = checkShareSum(samples, 3, { maxSpreadMs: 30, unclaimed: [{ fromMs: 50, toMs: 200 }] });
    expect(v.groupsExcluded).toBe(3);
    expect(v.violations.map((x) => x.sumPpm)).toEqual([1_050_000, 1_050_000, 1_050_000]);
    const none = checkShareSum(samples, 3, {
      maxSpreadMs: 30,
      unclaimed: [
        { fromMs: 50, toMs: 200 },
        { fromMs: 4990, toMs: 5100 },
      ],
    });
    expect(none.ok).toBe(true);
    expect(none.groupsChecked).toBe(0);
  });

  it("opens a window after each clock step and step back, and after nothing else", () => {
    const config = { lease: { epsilonMs: 250, loanDurationMs: 3000 }, gossip: { round: { maxMs: 500 } } };
    const windows = clockStepWindows(
      [
        { fault: { clockStepMs: -900 }, injectedMs: 10_000, healedMs: 14_000 },
        { fault: {}, injectedMs: 20_000, healedMs: 25_000 },
        { fault: { clockStepMs: 700 }, injectedMs: 30_000, healedMs: Number.NaN },
      ],
      config,
    );
    // D + |step| + 2 rounds + ε.
    expect(windows).toEqual([
      { fromMs: 10_000, toMs: 10_000 + 3000 + 900 + 1000 + 250 },
      { fromMs: 14_000, toMs: 14_000 + 3000 + 900 + 1000 + 250 },
      { fromMs: 30_000, toMs: 30_000 + 3000 + 700 + 1000 + 250 },
    ]);
  });

  it("skips a group whose requests took longer than the pairing window (no real instant in common)", () => {
    const slow = { ...sample(1, 100, 500_000), answeredMs: 160 };
    const v = checkShareSum([sample(0, 100, 600_000), slow, sample(2, 101, 100_000)], 3, { maxSpreadMs: 30 });
    expect(v.groupsChecked).toBe(0);
    expect(v.groupsSkipped).toBe(3);
  });
});

describe("convergence", () => {
  it("waits until every region knows what any surviving region knew at the heal", () => {
    const samples = [
      sample(0, 90, 0, { "a|r0.1": 10 }),
      sample(1, 95, 0, { "a|r0.1": 4 }),
      sample(1, 300, 0, { "a|r0.1": 9 }),
      sample(0, 310, 0, { "a|r0.1": 12 }),
      sample(1, 500, 0, { "a|r0.1": 10 }),
    ];
    expect(convergenceAfter(samples, 2, 100)).toBe(401);
    // Region 0 lost its state after its view at 90: its unshipped 10 is not expected back.
    expect(convergenceAfter(samples, 2, 100, [{ region: 0, atMs: 95 }])).toBe(211);
    // A loss before the view was asked for, or past the window after the event, leaves the view in.
    expect(convergenceAfter(samples, 2, 100, [{ region: 0, atMs: 80 }])).toBe(401);
    expect(convergenceAfter(samples, 2, 100, [{ region: 0, atMs: 5000 }], 1000)).toBe(401);
  });

  it("counts a loss from its injection, however long before the heal its Redis came back", () => {
    // Soak seed 2630: region 0's Redis SIGKILLed at 1000, restarted empty at
    // 11_500 (the heal). Its last view (900) holds 7 it never gossiped.
    const samples = [
      sample(0, 900, 0, { "a|r0.1": 7 }),
      sample(1, 950, 0, { "a|r0.1": 5 }),
      sample(1, 11_400, 0, { "a|r0.1": 5 }),
      sample(0, 11_600, 0, { "a|r0.1": 5 }),
      sample(1, 11_700, 0, { "a|r0.1": 5 }),
    ];
    expect(convergenceAfter(samples, 2, 11_500, [{ region: 0, atMs: 1000 }], 10_000)).toBe(201);
    expect(convergenceAfter(samples, 2, 11_500)).toBeNull();
  });

  it("starts the clock after a later fault that overlapped the convergence window", () => {
    // Healed at 1000, converged at 9000; a daemon was down 3000–8000 meanwhile.
    expect(quietFrom(1000, 9000, [{ injectedMs: 3000, healedMs: 8000 }])).toBe(8000);
    // A fault after the convergence, or healed before the heal, does not count.
    expect(
      quietFrom(1000, 9000, [
        { injectedMs: 9500, healedMs: 9800 },
        { injectedMs: 200, healedMs: 900 },
      ]),
    ).toBe(1000);
  });

  it("counts lateness from the reconnect, and converging before it is on time", () => {
    expect(convergenceLateness(1500, 800)).toBe(700);
    expect(convergenceLateness(500, 800)).toBe(0);
    expect(convergenceLateness(500, null)).toBe(0);
  });
});

describe("fail-closed", () => {
  const base = { region: 0, regionId: "x", cutMs: 1000, healMs: 5000, leasedMax: 3, breakerMs: 1000 };
  const rec = (sentMs: number, allowed: boolean, degraded: boolean) => ({
    region: 0,
    sentMs,
    answeredMs: sentMs + 5,
    allowed,
    degraded,
    cost: 1,
  });
  it("allows leased tokens only", () => {
    const ok = checkFailClosed([rec(1100, true, false), rec(1200, true, true), rec(2500, false, true)], base);
    expect(ok.ok).toBe(true);
    const over = checkFailClosed(
      [1100, 1200, 1300, 1400].map((t) => rec(t, true, true)),
      base,
    );
    expect(over.ok).toBe(false);
  });
  it("requires denials, and every answer after the breaker delay, to be degraded", () => {
    expect(checkFailClosed([rec(1100, false, false)], base).ok).toBe(false);
    expect(checkFailClosed([rec(2500, true, false)], base).ok).toBe(false);
  });
});

describe("plans", () => {
  const ctx = { regionIds: ["us-east", "eu-west", "ap-south"], leasedRegion: "ap-south" };
  it("are fixed by the seed", () => {
    for (const name of SCENARIO_NAMES)
      expect(planScenario(name, 42, ctx)).toEqual(planScenario(name, 42, ctx));
  });
  it("random schedules never overlap two faults of one class", () => {
    for (let seed = 0; seed < 200; seed++) {
      const faults = planScenario("random", seed, ctx).faults;
      expect(faults.length).toBeGreaterThanOrEqual(1);
      for (const a of faults)
        for (const b of faults)
          if (a !== b && FAULT_CLASS[a.kind] === FAULT_CLASS[b.kind])
            expect(a.endFrac < b.startFrac || b.endFrac < a.startFrac).toBe(true);
    }
  });
});
