// The soak's schedule as data (pure): the seed alone fixes where the load is
// hot and when (the hot region moves every 20–40 s), and which fault of the
// whole catalogue hits which region when. Faults of one lane (gossip links and
// daemon kills; Redis) never overlap (faults.ts FAULT_LANE says why links and
// daemons share one); faults of different lanes do, so a Redis restart can land
// in the middle of a partition. The runner (soak.ts) hands
// it to run-scenario.ts as one long scenario.
import {
  FAULT_CLASS,
  type FaultKind,
  type FaultLane,
  INSTANT_FAULTS,
  laneOf,
  SOAK_FAULT_KINDS,
} from "./faults.js";
import { Rng, subSeed } from "@geoquota/sim";
import type { PlannedFault, PlanContext, ScenarioPlan } from "./scenarios.js";

export interface SoakPhase {
  readonly atMs: number;
  readonly hot: string;
  readonly demand: Readonly<Record<string, number>>;
}

export interface SoakPlan {
  readonly seed: number;
  readonly durationMs: number;
  /** The load over time; the first phase starts at 0. */
  readonly phases: readonly SoakPhase[];
  /** As a scenario plan (fault times as fractions of the duration) for run-scenario.ts. */
  readonly scenario: ScenarioPlan;
}

/** No fault starts before this (the cluster under load first) … */
const QUIET_START_MS = 5000;
/** … and every fault has healed this long before the traffic stops (a last convergence under load). */
const QUIET_END_MS = 8000;

export function planSoak(
  seed: number,
  durationMs: number,
  ctx: PlanContext,
  options: {
    unsafe?: boolean;
    /** Kinds left out of the catalogue (a kind this host cannot run: clock steps without libfaketime). */
    skip?: readonly FaultKind[];
  } = {},
): SoakPlan {
  const ids = ctx.regionIds;
  if (ids.length < 2) throw new Error("the soak needs at least 2 regions");
  const rng = new Rng(subSeed(seed, "soak"));
  const kinds = SOAK_FAULT_KINDS.filter((k) => !(options.skip ?? []).includes(k));
  const phases: SoakPhase[] = [];
  let hot = rng.pick(ids);
  for (let at = 0; at < durationMs; at += rng.int(20_000, 40_000)) {
    if (phases.length > 0) hot = rng.pick(ids.filter((id) => id !== hot));
    const demand = Object.fromEntries(ids.map((id) => [id, id === hot ? rng.int(80, 110) : rng.int(5, 15)]));
    phases.push({ atMs: at, hot, demand });
  }
  const hotAt = (t: number) => [...phases].reverse().find((p) => p.atMs <= t)?.hot ?? phases[0]!.hot;

  const faults: PlannedFault[] = [];
  const busyUntil: Record<FaultLane, number> = { links: 0, redis: 0 };
  const lastEnd = durationMs - QUIET_END_MS;
  const frac = (t: number) => t / durationMs;
  let firstFaultMs = QUIET_START_MS;
  if (options.unsafe) {
    // The control: one unsafe fault early on the hot region, then the usual
    // mix once the raise has rolled out (every region acknowledges it, then
    // growth waits D + 2ε), so no partition delays the overshoot.
    const t = Math.min(QUIET_START_MS, durationMs / 5);
    faults.push({
      kind: "policy-raise-unseen",
      region: hotAt(t),
      peer: otherOf(ids, hotAt(t)),
      startFrac: frac(t),
      endFrac: frac(t),
    });
    firstFaultMs = t + 15_000;
  }
  // A failover and a daemon fault never overlap: a daemon restarted while the
  // failover's replica is attached finds a replica its config does not declare
  // and rightly refuses to start (GQ_ERR_REDIS_SETUP), which left a region down
  // for the rest of the 30-minute soak of 2 December (docs/soak-30m.md).
  let failoverUntil = 0;
  let daemonUntil = 0;
  const clash = (k: FaultKind, t: number) =>
    (FAULT_CLASS[k] === "daemon" && t < failoverUntil) || (k === "failover" && t < daemonUntil);
  for (let t = firstFaultMs; t < lastEnd - 2000; t += rng.int(1500, 5000)) {
    const free = kinds.filter((k) => busyUntil[laneOf(k)] <= t && !clash(k, t));
    if (free.length === 0) continue;
    const kind: FaultKind = rng.pick(free);
    const end = INSTANT_FAULTS.has(kind) ? t : Math.min(lastEnd, t + rng.int(2000, 12_000));
    const region = rng.float() < 0.5 ? hotAt(t) : rng.pick(ids);
    const peer = rng.pick(ids.filter((id) => id !== region));
    faults.push({ kind, region, peer, startFrac: frac(t), endFrac: frac(end) });
    // The next fault of a lane starts after this one's heal settled: a
    // restart (a daemon, a Redis) takes seconds on a loaded machine, and a
    // killed daemon's dead links must be gone before a toxic is touched.
    busyUntil[laneOf(kind)] = end + (FAULT_CLASS[kind] === "gossip" ? 1000 : 6000);
    if (kind === "failover") failoverUntil = busyUntil.redis;
    if (FAULT_CLASS[kind] === "daemon") daemonUntil = busyUntil.links;
  }
  faults.sort((a, b) => a.startFrac - b.startFrac);
  return {
    seed,
    durationMs,
    phases,
    scenario: {
      name: "random",
      seed,
      description: `soak: ${faults.length} faults from the whole catalogue under load whose hot region moves ${phases.length - 1} times`,
      guarantees: ["G1", "G3", "G4", "G5"],
      hot: phases[0]!.hot,
      demand: phases[0]!.demand,
      faults,
    },
  };
}

function otherOf(ids: readonly string[], x: string): string {
  return ids.find((id) => id !== x)!;
}
