// The seed mix of a normal run: many short seeds (few regions, a short span:
// cheap, so thousands fit in CI) around a few hundred full-length and harsh
// ones. Each kind is its own test, labelled so that a failing seed's replay
// command selects it (`-t "<label>"`); seeds of different kinds never overlap,
// also in long mode (GQ_SIM_LONG=1: 20× each).
import { runSeedsAsync, type SeedPlan, seedsToRun } from "@geoquota/sim";
import { runModel } from "./run.js";
import { scenarioFor } from "./scenario.js";
import type { ModelOptions } from "./types.js";

export interface SeedKind {
  /** The test's name starts with it; letters, digits, spaces and commas only (a -t pattern). */
  readonly label: string;
  /** Seeds per normal run (long mode: 20×). */
  readonly count: number;
  /** Seeds are consecutive from here. */
  readonly firstSeed: number;
  /** What the seeds of this kind must have exercised together (asserted when ≥ 50 seeds ran). */
  readonly covers: readonly (
    | "failovers"
    | "policyChanges"
    | "loans"
    | "leases"
    | "waitFailures"
    | "lateReplicas"
    | "evictions"
    | "reconnectedWaits"
  )[];
  readonly scenario: (seed: number) => ModelOptions;
}

/**
 * A short seed: scenarioFor's random world (limits, clocks, links,
 * partitions, state losses, restarts, stalls, WAIT timeouts, leased clients,
 * a policy change, failovers) with `regions` regions, 3 s of demand and a
 * 4.5 s quiet phase. (Before durable admissions, a failover early in a short
 * run, while the buckets were still full, broke G1 by re-admitting the
 * replication lag's admissions: 7 of 1 500 two-region seeds, e.g. 10000641.)
 * The quiet phase was 2 s before replicated policies: a region that lost both
 * its Redis and its daemon's memory processes no key until every peer carries
 * its new epoch (docs/design.md §3.4), up to two round trips after the heal
 * with 600 ms links, which left too little of 2 s to converge (10001157).
 * 4.5 s since rollout state leaves a region only from a durable snapshot
 * write (issue 21): each hop of a new epoch's confirmation now waits for the
 * peer's next round and its WAIT, so a region that lost everything was known
 * again only 2.7 s after the heal in harsh seed 30000012.
 */
export function shortScenarioFor(seed: number, regions: number): ModelOptions {
  return scenarioFor(seed, { regions, durationUs: 3_000_000, quiesceUs: 4_500_000 });
}

/** Every fault at its worst, on the world of `base`. */
export function harshScenario(base: ModelOptions): ModelOptions {
  return {
    ...base,
    maxCost: 3,
    faults: {
      ...base.faults,
      dropRate: 0.3,
      duplicateRate: 0.3,
      latencyMinUs: 1_000,
      latencyMaxUs: 900_000,
      partitionEveryUs: 2_000_000,
      stateLosses: 2,
      daemonRestarts: 2,
      failovers: 2,
      daemonDownAtFailoverUs: 2_000_000,
      policyChanges: 1,
    },
  };
}

/** protocol.sim: the default kinds. */
export const DEFAULT_SEED_KINDS: readonly SeedKind[] = [
  {
    label: "short, 2 regions",
    count: 1_650,
    firstSeed: 10_000_001,
    covers: [
      "failovers",
      "policyChanges",
      "loans",
      "leases",
      "waitFailures",
      "lateReplicas",
      "evictions",
      "reconnectedWaits",
    ],
    scenario: (seed) => shortScenarioFor(seed, 2),
  },
  {
    label: "short, 3 regions",
    count: 350,
    firstSeed: 20_000_001,
    covers: ["failovers", "policyChanges", "loans", "leases", "waitFailures"],
    scenario: (seed) => shortScenarioFor(seed, 3),
  },
  {
    label: "full length, 3 to 5 regions",
    count: 50,
    firstSeed: 1,
    covers: ["failovers", "policyChanges", "loans", "leases", "waitFailures"],
    scenario: (seed) => scenarioFor(seed),
  },
];

/** protocol.faults.sim: every fault at its worst. */
export const HARSH_SEED_KINDS: readonly SeedKind[] = [
  {
    label: "harsh, full length",
    count: 20,
    firstSeed: 1_000_001,
    covers: ["failovers", "policyChanges", "loans"],
    scenario: (seed) => harshScenario(scenarioFor(seed)),
  },
  {
    label: "harsh, short, 3 regions",
    count: 120,
    firstSeed: 30_000_001,
    covers: ["failovers", "policyChanges", "loans"],
    scenario: (seed) => harshScenario(shortScenarioFor(seed, 3)),
  },
];

export function seedPlanOf(kind: SeedKind): SeedPlan {
  return { count: kind.count, firstSeed: kind.firstSeed };
}

/** Seeds this run gives the kind (GQ_SEED: that one; GQ_SIM_LONG=1: 20×). */
export function seedCountOf(kind: SeedKind): number {
  return seedsToRun(seedPlanOf(kind)).length;
}

/** The command that replays one seed of a kind (`file`: the test file's filter, e.g. protocol.sim). */
export function replayCommand(kind: SeedKind, file: string, seed: number): string {
  return `GQ_SEED=${seed} pnpm exec vitest run --project simulator ${file} -t "${kind.label}"`;
}

export interface KindTotals {
  seeds: number;
  events: number;
  failovers: number;
  policyChanges: number;
  loans: number;
  leases: number;
  waitFailures: number;
  lateReplicas: number;
  evictions: number;
  reconnectedWaits: number;
}

/**
 * Runs every seed of a kind; the first failing seed throws with the checker's
 * message and the command that replays it.
 */
export async function runSeedKind(kind: SeedKind, file: string): Promise<KindTotals> {
  const t: KindTotals = {
    seeds: 0,
    events: 0,
    failovers: 0,
    policyChanges: 0,
    loans: 0,
    leases: 0,
    waitFailures: 0,
    lateReplicas: 0,
    evictions: 0,
    reconnectedWaits: 0,
  };
  t.seeds = await runSeedsAsync(kind.label, seedPlanOf(kind), async (seed) => {
    const opts = kind.scenario(seed);
    const r = await runModel(opts);
    if (!r.ok) {
      throw new Error(`${r.failure ?? `seed ${seed} failed`}\n  replay: ${replayCommand(kind, file, seed)}`);
    }
    t.events += r.events;
    t.failovers += r.failovers;
    t.policyChanges += opts.faults.policyChanges;
    t.loans += r.loansGranted;
    t.leases += r.leases;
    t.waitFailures += r.waitFailures;
    t.lateReplicas += r.lateReplicas;
    t.evictions += r.evictions;
    t.reconnectedWaits += r.reconnectedWaits;
  });
  return t;
}
