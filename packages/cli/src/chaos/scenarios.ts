// The chaos scenarios as data (pure): who is hot, which faults hit which
// region, when (as fractions of the scenario's duration). The seed fixes all
// of it; the runner (run-scenario.ts) turns a plan into actions on a cluster.
import { FAULT_KINDS, type FaultKind, laneOf } from "./faults.js";
import { Rng, subSeed } from "@geoquota/sim";

/** Every fault kind as a scenario of its own, plus a random mix of them. */
export const SCENARIO_NAMES = [...FAULT_KINDS, "random"] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

export interface PlannedFault {
  readonly kind: FaultKind;
  readonly region: string;
  readonly peer: string;
  /** Offsets as fractions of the scenario duration. */
  readonly startFrac: number;
  readonly endFrac: number;
}

export interface ScenarioPlan {
  readonly name: ScenarioName;
  readonly seed: number;
  readonly description: string;
  /** The DESIGN §1 guarantees this scenario exercises. */
  readonly guarantees: readonly string[];
  readonly hot: string;
  /** Requests per second per region (open loop, cost 1). */
  readonly demand: Readonly<Record<string, number>>;
  readonly faults: readonly PlannedFault[];
}

export interface PlanContext {
  readonly regionIds: readonly string[];
  /** The region whose limiter serves from in-process leases (the Redis-loss target). */
  readonly leasedRegion: string;
}

export function parseScenarioName(value: string): ScenarioName | "all" | { error: string } {
  if (value === "all") return "all";
  if ((SCENARIO_NAMES as readonly string[]).includes(value)) return value as ScenarioName;
  return { error: `--scenario: expected one of ${SCENARIO_NAMES.join(", ")} or all, got "${value}"` };
}

/** Skewed demand: one hot region well above r on its own, the others a trickle. */
function skewed(rng: Rng, ids: readonly string[], hot: string): Record<string, number> {
  return Object.fromEntries(ids.map((id) => [id, id === hot ? rng.int(80, 110) : rng.int(5, 15)]));
}

function otherThan(rng: Rng, ids: readonly string[], x: string): string {
  return rng.pick(ids.filter((id) => id !== x));
}

/** A randomized schedule: 3–5 faults; two faults of one class (gossip, redis, daemon) never overlap. */
function randomFaults(rng: Rng, ids: readonly string[], hot: string): PlannedFault[] {
  const out: PlannedFault[] = [];
  const want = rng.int(3, 5);
  for (let attempt = 0; out.length < want && attempt < 50; attempt++) {
    const kind = rng.pick(FAULT_KINDS);
    const startFrac = 0.1 + rng.float() * 0.5;
    const instant = kind === "flush";
    const endFrac = instant ? startFrac : Math.min(0.75, startFrac + 0.1 + rng.float() * 0.2);
    const clash = out.some(
      (f) =>
        laneOf(f.kind) === laneOf(kind) && startFrac <= f.endFrac + 0.03 && f.startFrac <= endFrac + 0.03,
    );
    if (clash) continue;
    const region = rng.float() < 0.5 ? hot : rng.pick(ids);
    out.push({ kind, region, peer: otherThan(rng, ids, region), startFrac, endFrac });
  }
  return out.sort((a, b) => a.startFrac - b.startFrac);
}

export function planScenario(name: ScenarioName, seed: number, ctx: PlanContext): ScenarioPlan {
  const ids = ctx.regionIds;
  if (ids.length < 2) throw new Error("chaos scenarios need at least 2 regions");
  const rng = new Rng(subSeed(seed, name));
  let hot = rng.pick(ids);
  const one = (kind: FaultKind, region: string, peer: string, startFrac: number, endFrac: number) => [
    { kind, region, peer, startFrac, endFrac },
  ];
  let faults: PlannedFault[];
  let description: string;
  let guarantees: string[];
  switch (name) {
    case "isolate":
      faults = one("isolate", hot, otherThan(rng, ids, hot), 0.25, 0.65);
      description = "the hot region (a borrower) is cut off from every peer, then healed";
      guarantees = ["G1", "G4"];
      break;
    case "split": {
      const minority = otherThan(rng, ids, hot);
      faults = one("split", minority, hot, 0.25, 0.65);
      description = "2|1 split as a black hole; stalled frames arrive late at heal";
      guarantees = ["G1", "G4"];
      break;
    }
    case "asymmetric": {
      const lender = otherThan(rng, ids, hot);
      const [from, to] = rng.float() < 0.5 ? [lender, hot] : [hot, lender];
      faults = one("asymmetric", from, to, 0.25, 0.65);
      description = "one direction of one link stalls (timeout toxic), the other flows";
      guarantees = ["G1", "G4"];
      break;
    }
    case "flapping":
      faults = one("flapping", hot, otherThan(rng, ids, hot), 0.2, 0.7);
      description = "the link between the hot region and a lender flaps";
      guarantees = ["G1", "G4"];
      break;
    case "slow-link":
      faults = one("slow-link", hot, otherThan(rng, ids, hot), 0.25, 0.65);
      description = "the hot region's links become slow and narrow (bandwidth + slicer)";
      guarantees = ["G1", "G4"];
      break;
    case "reset-peer":
      faults = one("reset-peer", hot, otherThan(rng, ids, hot), 0.25, 0.65);
      description = "the hot region's links are reset by peer over and over";
      guarantees = ["G1", "G4"];
      break;
    case "redis-loss":
      hot = ctx.leasedRegion;
      faults = one("redis-loss", hot, otherThan(rng, ids, hot), 0.3, 0.6);
      description = "the hot, leased region loses its Redis: fail-closed, degraded answers";
      guarantees = ["G1", "G3"];
      break;
    case "flush": {
      const r = rng.float() < 0.5 ? hot : otherThan(rng, ids, hot);
      faults = one("flush", r, otherThan(rng, ids, r), 0.4, 0.4);
      description = "FLUSHALL on one region's Redis mid-run";
      guarantees = ["G1", "G5"];
      break;
    }
    case "redis-restart": {
      const r = rng.float() < 0.5 ? hot : otherThan(rng, ids, hot);
      faults = one("redis-restart", r, otherThan(rng, ids, r), 0.35, 0.45);
      description = "one region's Redis is SIGKILLed and restarted without persistence";
      guarantees = ["G1", "G5"];
      break;
    }
    case "daemon-kill": {
      const r = rng.float() < 0.5 ? hot : otherThan(rng, ids, hot);
      faults = one("daemon-kill", r, otherThan(rng, ids, r), 0.35, 0.5);
      description = "one gossip daemon is SIGKILLed and restarted";
      guarantees = ["G1", "G5"];
      break;
    }
    case "random":
      faults = randomFaults(rng, ids, hot);
      description = "a seeded schedule of faults from every kind, overlapping across classes";
      guarantees = ["G1", "G4", "G5"];
      break;
  }
  return { name, seed, description, guarantees, hot, demand: skewed(rng, ids, hot), faults };
}
