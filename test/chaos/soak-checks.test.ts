// The soak's pure parts: the flatness verdict (a leak fails, noise and a
// restart's dip do not, too few samples cannot pass) and the seeded plan
// (replayable, every catalogue kind reachable, one class never overlapping).
import { describe, expect, it } from "vitest";
import { FAULT_CLASS, SOAK_FAULT_KINDS } from "../../packages/cli/src/chaos/faults.js";
import { checkFlat, type ResourceSeries } from "../../packages/cli/src/chaos/resources.js";
import { planSoak } from "../../packages/cli/src/chaos/soak-plan.js";

const MIB = 1024 * 1024;
const series = (f: (t: number) => number, n = 90, stepMs = 1000): ResourceSeries => ({
  process: "p",
  metric: "rssBytes",
  points: Array.from({ length: n }, (_, i) => ({ tMs: i * stepMs, value: Math.round(f(i * stepMs)) })),
});

describe("flat after warm-up", () => {
  it("passes a warm-up ramp, GC sawtooth and a restart's dip", () => {
    const v = checkFlat(
      series((t) =>
        t < 20_000
          ? (40 + t / 1000) * MIB
          : (60 + ((t / 1000) % 7)) * MIB * (t > 70_000 && t < 75_000 ? 0.5 : 1),
      ),
      0,
      89_000,
    );
    expect(v.ok, v.reason).toBe(true);
  });
  it("fails a steady leak", () => {
    // 5 MiB/s from 60 MiB: the last third's peak is 150 MiB over the middle third's.
    const v = checkFlat(
      series((t) => (60 + (5 * t) / 1000) * MIB),
      0,
      89_000,
    );
    expect(v.ok).toBe(false);
    expect(v.reason).toContain("grew");
  });
  it("cannot pass with too few samples", () => {
    expect(
      checkFlat(
        series(() => MIB, 4, 1000),
        0,
        3000,
      ).ok,
    ).toBe(false);
  });
});

describe("soak plan", () => {
  const ctx = { regionIds: ["us-east", "eu-west", "ap-south"], leasedRegion: "ap-south" };
  it("is fixed by the seed", () => {
    expect(planSoak(5, 180_000, ctx)).toEqual(planSoak(5, 180_000, ctx));
    expect(planSoak(5, 180_000, ctx)).not.toEqual(planSoak(6, 180_000, ctx));
  });
  it("moves the hot region and reaches every kind of the catalogue", () => {
    const seen = new Set<string>();
    for (let seed = 0; seed < 20; seed++) {
      const p = planSoak(seed, 1_800_000, ctx);
      for (let i = 1; i < p.phases.length; i++) expect(p.phases[i]!.hot).not.toBe(p.phases[i - 1]!.hot);
      for (const f of p.scenario.faults) seen.add(f.kind);
    }
    expect([...seen].sort()).toEqual([...SOAK_FAULT_KINDS].sort());
  });
  it("never overlaps two faults of one class, and heals them all before the end", () => {
    for (let seed = 0; seed < 50; seed++) {
      const faults = planSoak(seed, 180_000, ctx).scenario.faults;
      expect(faults.length).toBeGreaterThan(10);
      for (const f of faults) expect(f.endFrac).toBeLessThan(1);
      for (const a of faults)
        for (const b of faults)
          if (a !== b && FAULT_CLASS[a.kind] === FAULT_CLASS[b.kind])
            expect(a.endFrac < b.startFrac || b.endFrac < a.startFrac).toBe(true);
    }
  });
  it("never lets a daemon fault overlap a failover (a daemon restarted beside the failover's replica refuses to start)", () => {
    let pairs = 0;
    for (let seed = 0; seed < 50; seed++) {
      const faults = planSoak(seed, 1_800_000, ctx).scenario.faults;
      const failovers = faults.filter((f) => f.kind === "failover");
      const daemons = faults.filter((f) => FAULT_CLASS[f.kind] === "daemon");
      for (const a of failovers)
        for (const b of daemons) {
          pairs++;
          expect(
            a.endFrac < b.startFrac || b.endFrac < a.startFrac,
            `seed ${seed}: ${a.kind} and ${b.kind}`,
          ).toBe(true);
        }
    }
    expect(pairs).toBeGreaterThan(100);
  });

  it("never lets a daemon kill overlap a gossip-link fault (a toxic touched beside a dead peer deadlocks Toxiproxy)", () => {
    let pairs = 0;
    for (let seed = 0; seed < 50; seed++) {
      const faults = planSoak(seed, 1_800_000, ctx).scenario.faults;
      const links = faults.filter((f) => FAULT_CLASS[f.kind] === "gossip");
      const daemons = faults.filter((f) => FAULT_CLASS[f.kind] === "daemon");
      for (const a of links)
        for (const b of daemons) {
          pairs++;
          expect(
            a.endFrac < b.startFrac || b.endFrac < a.startFrac,
            `seed ${seed}: ${a.kind} [${a.startFrac}, ${a.endFrac}] and ${b.kind} [${b.startFrac}, ${b.endFrac}]`,
          ).toBe(true);
        }
    }
    expect(pairs).toBeGreaterThan(1000);
  });

  it("leaves out a skipped kind (clock steps without libfaketime) and is still fixed by the seed", () => {
    const skip = ["clock-step"] as const;
    expect(planSoak(5, 1_800_000, ctx, { skip })).toEqual(planSoak(5, 1_800_000, ctx, { skip }));
    expect(planSoak(5, 1_800_000, ctx).scenario.faults.some((f) => f.kind === "clock-step")).toBe(true);
    expect(planSoak(5, 1_800_000, ctx, { skip }).scenario.faults.some((f) => f.kind === "clock-step")).toBe(
      false,
    );
  });
  it("plants exactly one unsafe fault in the control only", () => {
    expect(planSoak(5, 60_000, ctx).scenario.faults.some((f) => f.kind === "policy-raise-unseen")).toBe(
      false,
    );
    const unsafe = planSoak(5, 60_000, ctx, { unsafe: true }).scenario.faults;
    expect(unsafe.filter((f) => f.kind === "policy-raise-unseen")).toHaveLength(1);
  });
});
