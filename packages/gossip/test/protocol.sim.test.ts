// Whole-protocol deterministic simulation (VOPR-style) of the production
// GossipDaemon: every seed is a random scenario (3–5 regions, clock offsets up
// to 2ε apart, drop/dup/reorder/delay, partitions, state losses, daemon
// restarts, failovers that lose writes with the daemon down around them, a
// policy change, shifting demand); the checkers run after every event. A
// failure names its seed: replay with GQ_SEED=<n>; GQ_SIM_LONG=1 runs 20× more
// seeds. The faults today's code fails (KnownViolations) are asserted caught.
import { isLongMode, runSeedsAsync } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import {
  bruteForceExcess,
  DEFAULT_MODEL_OPTIONS,
  type FaultOptions,
  type KnownViolations,
  type ModelOptions,
  type ModelResult,
  type PlantedBugs,
  runModel,
  scenarioFor,
  WindowOracle,
} from "../src/model/index.js";

const LONG = isLongMode();
/** Seeds of the default scenario per normal run (GQ_SIM_LONG=1: 20×). */
const SEEDS = 200;
const QUIET: FaultOptions = { ...DEFAULT_MODEL_OPTIONS.faults, latencyMaxUs: 50_000 };
const REPLAY = "pnpm exec vitest run --project gossip protocol.sim";

function mustPass(r: ModelResult): void {
  if (!r.ok)
    throw new Error(`${r.failure ?? `seed ${r.seed} failed`}\n  replay: GQ_SEED=${r.seed} ${REPLAY}`);
}

/** Searches seeds until a checker fails; returns the first failure (or undefined). */
async function firstFailing(
  maxSeeds: number,
  make: (seed: number) => ModelOptions,
  firstSeed = 1,
): Promise<string | undefined> {
  for (let seed = firstSeed; seed < firstSeed + maxSeeds; seed++) {
    const r = await runModel(make(seed));
    if (!r.ok) return r.failure;
  }
  return undefined;
}

describe("the exact G1 oracle", () => {
  it("agrees with brute force over all windows", () => {
    let x = 7;
    const next = (m: number): number => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x % m;
    };
    for (let trial = 0; trial < 200; trial++) {
      const adm: { atUs: number; cost: number }[] = [];
      let t = 0;
      for (let i = 0; i < 40; i++) {
        t += next(3) === 0 ? 0 : next(200_000);
        adm.push({ atUs: t, cost: 1 + next(3) });
      }
      const o = new WindowOracle(5, 10);
      for (const a of adm) o.admit(a.atUs, a.cost);
      expect(o.worstExcessScaled).toBe(bruteForceExcess(adm, 5, 10));
      expect(o.violation === undefined).toBe(bruteForceExcess(adm, 5, 10) <= 0);
    }
  });
});

describe("whole protocol under random faults, the production daemon", () => {
  it("keeps Σ s ≤ U at every instant, G1 exactly (across policy changes), and converges after heal", async () => {
    let failovers = 0;
    let policyChanges = 0;
    let loans = 0;
    const n = await runSeedsAsync("protocol sim", { count: SEEDS, longCount: SEEDS * 20 }, async (seed) => {
      const opts = scenarioFor(seed);
      const r = await runModel(opts);
      mustPass(r);
      failovers += r.failovers;
      policyChanges += opts.faults.policyChanges;
      loans += r.loansGranted;
    });
    expect(n).toBeGreaterThan(0);
    if (n >= 100) {
      // The faults the default set claims to cover did happen.
      expect(failovers).toBeGreaterThan(0);
      expect(policyChanges).toBeGreaterThan(0);
      expect(loans).toBeGreaterThan(0);
    }
  }, 600_000);
});

describe("utilization and re-weighting (production daemon)", () => {
  it("a single hot region reaches ≥ 0.95 of r once loans settle (3 regions, floor 2%)", async () => {
    await runSeedsAsync("hot region", { count: 6, firstSeed: 2_000_001 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          regions: 3,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2 },
          durationUs: 14_000_000,
        }),
      );
      mustPass(r);
      if (!(r.utilization >= 0.95)) throw new Error(`utilization ${r.utilization} < 0.95`);
    });
  }, 120_000);

  it("quota follows a moving hot spot within a few seconds", async () => {
    await runSeedsAsync("demand shift", { count: 6, firstSeed: 3_000_001 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          regions: 3,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2, shiftAtUs: 8_000_000 },
          durationUs: 16_000_000,
        }),
      );
      mustPass(r);
      if (r.reweightUs === undefined || r.reweightUs > 4_000_000) {
        throw new Error(`re-weighting took ${r.reweightUs} µs`);
      }
    });
  }, 120_000);
});

function withBugs(bugs: PlantedBugs, faults?: Partial<FaultOptions>) {
  return (seed: number): ModelOptions => {
    const base = scenarioFor(seed, { bugs });
    return faults === undefined ? base : { ...base, faults: { ...base.faults, ...faults } };
  };
}

describe("planted bugs make the checkers fail", () => {
  it("(a) borrower uses a loan until deadline + ε", async () => {
    const f = await firstFailing(100, withBugs({ borrowerLate: true }));
    expect(f, "no seed in 1..100 caught the late borrower").toBeDefined();
    expect(f).toMatch(/GQ_SEED=\d+/);
  }, 120_000);

  it("(b) lender re-lends borrowed units and lends below its floor", async () => {
    const f = await firstFailing(100, withBugs({ relendBorrowed: true }));
    expect(f, "no seed in 1..100 caught re-lending").toBeDefined();
  }, 120_000);

  it("(c) recovery skipped after state loss or failover", async () => {
    const f = await firstFailing(100, withBugs({ skipRecovery: true }, { stateLosses: 2 }));
    expect(f, "no seed in 1..100 caught the skipped recovery").toBeDefined();
  }, 120_000);

  it("(d) coarse lazy refill: a share that rose without a script is credited over the whole interval", async () => {
    // r1 lends to r0 (r0 hot); r0's daemon dies at 4 s, so the loan lapses
    // unrenewed: r0 stops using it at deadline − ε exactly when r1's
    // reservation ends (clocks 2ε apart). r0 refilled its enlarged bucket
    // while idle and bursts it just before; r1, denied at its floor since
    // 4.5 s (a denial stores nothing), then settles across the rise.
    const coarse = (bugs: PlantedBugs) => (seed: number) =>
      scenarioFor(seed, {
        regions: 3,
        capacity: 20,
        refillPerSecond: 20,
        maxCost: 1,
        clockSpreadUs: 500_000,
        durationUs: 9_000_000,
        faults: { ...QUIET, daemonDowns: [{ atUs: 4_000_000, untilUs: 14_000_000, region: 0 }] },
        demand: {
          kind: "phases",
          phases: [
            { atUs: 0, rates: [3, 0, 0] },
            { atUs: 4_000_000, rates: [0, 0, 0] },
            { atUs: 4_500_000, rates: [0, 20, 0] },
            { atUs: 6_300_000, rates: [20, 20, 0] },
          ],
        },
        bugs,
      });
    await runSeedsAsync("coarse refill scenario, correct model", { count: 3 }, async (seed) =>
      mustPass(await runModel(coarse({})(seed))),
    );
    const f = await firstFailing(20, coarse({ coarseRefill: true }));
    expect(f, "no seed in 1..20 caught the coarse refill").toBeDefined();
    expect(f).toMatch(/G1 violated/);
  }, 120_000);

  it("clock offsets beyond 2ε break Σ s ≤ U (ε is load-bearing)", async () => {
    const f = await firstFailing(100, (seed) => scenarioFor(seed, { clockSpreadUs: 1_500_000 }));
    expect(f, "a 6ε clock spread was never caught").toBeDefined();
  }, 120_000);

  it("a policy change that grows before loans from the old bases lapsed breaks Σ s ≤ U", async () => {
    const f = await firstFailing(100, (seed) => {
      const base = scenarioFor(seed, { policyRule: { growAfterUs: 0 } });
      return { ...base, faults: { ...QUIET, policyChanges: 1 } };
    });
    expect(f, "growing at once after the change was never caught").toBeDefined();
  }, 120_000);
});

describe("known violations of today's code are caught (enable in the default set once fixed)", () => {
  const known = (k: KnownViolations) => (seed: number) => scenarioFor(seed, { known: k });

  it("WAIT failures: a held-back grant or return is shipped by the next round, then lost by a failover", async () => {
    const f = await firstFailing(150, (seed) => {
      const base = known({ waitFailures: true })(seed);
      return { ...base, faults: { ...base.faults, failovers: 2, replicaStalls: 2, waitFailRate: 0.3 } };
    });
    expect(f, "no seed in 1..150 caught the WAIT bypass").toBeDefined();
  }, 240_000);

  it("leased clients: leased tokens outlive a share decrease", async () => {
    const f = await firstFailing(100, (seed) => {
      const base = known({ leasedClients: true })(seed);
      return { ...base, clients: { ...base.clients, perRegionMax: 2 } };
    });
    expect(f, "no seed in 1..100 caught unpinned leases").toBeDefined();
  }, 240_000);
});

if (LONG) {
  describe("long mode", () => {
    it("is on", () => expect(LONG).toBe(true));
  });
}
