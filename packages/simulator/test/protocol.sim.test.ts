// Whole-protocol deterministic simulation (VOPR-style) of the production
// GossipDaemon: every seed is a random scenario (clock offsets up to 2ε apart,
// drop/dup/reorder/delay, partitions, state losses, daemon restarts, replica
// stalls and WAIT timeouts, leased clients, a policy change, shifting demand;
// the full-length kind also failovers that lose writes with the daemon down
// around them); the checkers run after every event. The seed mix
// (src/mix.ts): thousands of short seeds with 2 or 3 regions and a few
// hundred full-length ones with 3 to 5; each kind is a test whose name gives
// its seed count. A failure names its seed and the command that replays it
// (GQ_SEED=<n> … -t "<kind>"); GQ_SIM_LONG=1 runs 20× more seeds. Planted bugs
// are asserted caught in protocol.planted.sim.test.ts.
import { isLongMode, runSeedsAsync } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL_OPTIONS,
  DEFAULT_SEED_KINDS,
  type FaultOptions,
  type ModelResult,
  runModel,
  runSeedKind,
  scenarioFor,
  seedCountOf,
} from "../src/index.js";

const LONG = isLongMode();
/** Long mode runs 20× the seeds of each kind. */
const KIND_TIMEOUT_MS = LONG ? 20 * 600_000 : 600_000;
const QUIET: FaultOptions = { ...DEFAULT_MODEL_OPTIONS.faults, latencyMaxUs: 50_000 };
const REPLAY = "pnpm exec vitest run --project simulator protocol.sim";

function mustPass(r: ModelResult): void {
  if (!r.ok)
    throw new Error(`${r.failure ?? `seed ${r.seed} failed`}\n  replay: GQ_SEED=${r.seed} ${REPLAY}`);
}

const TOTAL = DEFAULT_SEED_KINDS.reduce((a, k) => a + seedCountOf(k), 0);

describe(`whole protocol under random faults, the production daemon: ${TOTAL} seeds`, () => {
  // Each checks Σ s ≤ U at every instant, the leases, G1 exactly (across
  // policy changes) and convergence after heal.
  for (const kind of DEFAULT_SEED_KINDS) {
    it(
      `${kind.label}: ${seedCountOf(kind)} seeds`,
      async () => {
        const t = await runSeedKind(kind, "protocol.sim");
        expect(t.seeds).toBe(seedCountOf(kind));
        if (t.seeds >= 50) {
          // The faults the kind claims to cover did happen.
          for (const what of kind.covers) expect(t[what], what).toBeGreaterThan(0);
        }
      },
      KIND_TIMEOUT_MS,
    );
  }
});

describe("replicated policy versions (issue 15): the daemons roll out proposals made at random times", () => {
  it("two changes in a row with partitions, a state loss and a daemon restart: G1 exact across both, every region completes the last", async () => {
    await runSeedsAsync("two policy changes", { count: 8 }, async (seed) => {
      const base = scenarioFor(seed, { durationUs: 14_000_000, quiesceUs: 8_000_000 });
      const r = await runModel({
        ...base,
        faults: {
          ...QUIET,
          policyChanges: 2,
          partitionEveryUs: 3_000_000,
          stateLosses: 1,
          daemonRestarts: 1,
        },
      });
      mustPass(r);
      // Liveness: healed, every region grew to the last version.
      expect(r.policyCompletedUs, `seed ${seed}: the last version never completed everywhere`).toBeDefined();
    });
  }, 300_000);

  it("a change made while a region is cut off (isolated 0.5–10 s, the proposal inside): nobody grows before every region acknowledged", async () => {
    await runSeedsAsync("one change, a region isolated", { count: 20 }, async (seed) => {
      const base = scenarioFor(seed, { durationUs: 12_000_000, quiesceUs: 8_000_000 });
      const r = await runModel({
        ...base,
        faults: {
          ...QUIET,
          policyChanges: 1,
          isolations: [{ isolate: 1, atUs: 500_000, untilUs: 10_000_000 }],
        },
      });
      mustPass(r);
      expect(r.policyCompletedUs, `seed ${seed}: the version never completed everywhere`).toBeDefined();
    });
  }, 600_000);
});

describe("window algorithms across rollouts (trap 8, docs/design.md §3.5)", () => {
  // Re-weighting proposals at random times, every region over its slice most of the time (a
  // window of 8 s is longer than the D + 2ε growth wait, so a growth without the window wait
  // lands mid-window): Σ over regions of one window's admissions ≤ C, checked at each admission.
  it("fixed window, sliding counter, sliding log: one window's admissions ≤ C before, across and after one or two re-weightings", async () => {
    const algorithms = ["fixed_window", "sliding_window", "sliding_log"] as const;
    let completed = 0;
    await runSeedsAsync("window re-weighting", { count: 12 }, async (seed) => {
      const base = scenarioFor(seed, { durationUs: 45_000_000, quiesceUs: 30_000_000 });
      const r = await runModel({
        ...base,
        algorithm: algorithms[seed % 3] as (typeof algorithms)[number],
        windowMs: 20_000,
        capacity: 60,
        refillPerSecond: 20,
        demand: { kind: "phases", phases: [{ atUs: 0, rates: [3, 3, 3] }] },
        regions: 2 + (seed % 2),
        clients: DEFAULT_MODEL_OPTIONS.clients,
        faults: { ...QUIET, policyChanges: 1 + (seed % 2), partitionEveryUs: seed % 4 === 0 ? 6_000_000 : 0 },
      });
      mustPass(r);
      expect(r.admitted, `seed ${seed}: nothing admitted`).toBeGreaterThan(0);
      // A drawn split equal to the old one is no new version (nothing to complete).
      if (r.policyCompletedUs !== undefined) completed++;
    });
    expect(completed).toBeGreaterThanOrEqual(8);
  }, 300_000);
});

describe("replay", () => {
  it("a seed replays exactly (same events, admissions, loans, leases)", async () => {
    for (const seed of [7, 11]) {
      // Leased clients on static slices for one of them (scenarioFor's choice is seeded too).
      const opts = scenarioFor(seed, {
        faults: { ...scenarioFor(seed).faults, failovers: 1, policyChanges: 1 },
      });
      const a = await runModel(opts);
      const b = await runModel(opts);
      expect(b).toEqual(a);
      expect(a.events).toBeGreaterThan(0);
    }
  }, 120_000);
});

describe("state loss under a running daemon", () => {
  it("the wiped Redis re-learns its peers' counters from the daemon's map (no demand left to gossip)", async () => {
    // Demand everywhere until 4 s, then none; r0's Redis is wiped at 5 s with
    // its daemon up: nothing peers send changes its map, so only the daemon
    // seeing Redis lack its map's counters can merge them back.
    await runSeedsAsync("wipe, daemon up", { count: 3 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          reweighting: true,
          clients: DEFAULT_MODEL_OPTIONS.clients,
          durationUs: 7_000_000,
          faults: { ...QUIET, wipes: [{ atUs: 5_000_000, region: 0 }] },
          demand: {
            kind: "phases",
            phases: [
              { atUs: 0, rates: [0.5, 0.5, 0.5, 0.5, 0.5] },
              { atUs: 4_000_000, rates: [0, 0, 0, 0, 0] },
            ],
          },
        }),
      );
      mustPass(r);
    });
  }, 120_000);
});

describe("utilization and re-weighting (production daemon)", () => {
  it("a single hot region reaches ≥ 0.95 of r once loans settle (3 regions, floor 2%)", async () => {
    await runSeedsAsync("hot region", { count: 6, firstSeed: 2_000_001 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          regions: 3,
          // Whole tokens: a small C at a low r measures granularity, not re-weighting.
          refillPerSecond: 100,
          capacity: 50,
          reweighting: true,
          clients: DEFAULT_MODEL_OPTIONS.clients,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2 },
          durationUs: 14_000_000,
        }),
      );
      mustPass(r);
      if (!(r.utilization >= 0.95)) throw new Error(`utilization ${r.utilization} < 0.95`);
    });
  }, 120_000);

  // The bench's 90/5/5 split at 1.5·r (section 5): the two small regions' demand sits near their
  // slices, so its estimates' noise moves the targets a little every round. Loans renewed at
  // their size unless the wanted one shrank by 5% of U keep what the lenders reserve in use:
  // these seeds average 0.956 of r over the whole run, burst included (0.932 when every 1% move
  // shrank a loan, whose lender reserved the larger one for D + ε more).
  it("a 90/5/5 split keeps ≥ 0.945 of r on average (loans not shrunk by noise)", async () => {
    let sum = 0;
    const seeds = 10;
    await runSeedsAsync("90/5/5", { count: seeds, firstSeed: 4_000_001 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          regions: 3,
          refillPerSecond: 200,
          capacity: 200,
          reweighting: true,
          clients: DEFAULT_MODEL_OPTIONS.clients,
          faults: QUIET,
          demand: { kind: "phases", phases: [{ atUs: 0, rates: [1.35, 0.075, 0.075] }] },
          durationUs: 14_000_000,
        }),
      );
      mustPass(r);
      sum += r.admitted / (200 * 14);
    });
    expect(sum / seeds).toBeGreaterThanOrEqual(0.945);
  }, 120_000);

  // Virtual time (deterministic per seed), not this machine's speed: with the fast rounds while
  // targets move, the peers' wakes (a peer's denials that move the targets, a loan given back)
  // and a 100 ms demand half-life these seeds take 0.65–0.87 s (20 more seeds: 0.57–1.14 s);
  // at 150 ms without the peers' wakes 0.85–1.25 s; at the old 500 ms half-life without fast
  // rounds, 2.2–2.6 s (issue 24 point 6).
  it("quota follows a moving hot spot within 1.2 s of simulated time", async () => {
    await runSeedsAsync("demand shift", { count: 6, firstSeed: 3_000_001 }, async (seed) => {
      const r = await runModel(
        scenarioFor(seed, {
          regions: 3,
          refillPerSecond: 100,
          capacity: 50,
          reweighting: true,
          clients: DEFAULT_MODEL_OPTIONS.clients,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2, shiftAtUs: 8_000_000 },
          durationUs: 16_000_000,
        }),
      );
      mustPass(r);
      if (r.reweightUs === undefined || r.reweightUs > 1_200_000) {
        throw new Error(`re-weighting took ${r.reweightUs} µs`);
      }
    });
  }, 120_000);
});

if (LONG) {
  describe("long mode", () => {
    it("is on", () => expect(LONG).toBe(true));
  });
}
