// Checker: G1 at every admission, exactly. Rate algorithms: the WindowOracle
// (every window between admissions, integer arithmetic); with a policy change
// the old bound before the first proposal, max(C_old, C_new) + max(r_old,
// r_new)·T over everything, and the new bound once every region completed the
// last version and leases and loans from before expired. Window algorithms:
// per window index of the admitting region's Redis clock, Σ cost ≤ C (the
// rollout keeps C, so one bound holds before, across and after it). Also the
// utilization over the measured part of the run.
import { WindowOracle } from "@geoquota/sim";
import type { PolicySpec } from "./policies.js";
import type { Node, World } from "./world.js";

export interface PolicyChangeBounds {
  readonly newSpec: PolicySpec;
  readonly finalProposal: string;
  /** Admissions before this instant feed the old oracle. */
  readonly firstShrinkUs: number;
}

export interface G1Checker {
  /** An admission of `cost` by `node`'s limiter or clients, now. */
  admit(cost: number, node: Node): void;
  /** The largest capacity of any policy of the run (the lease checker's bound). */
  readonly boundCapacity: number;
  /** Policy changes are scheduled: the bound over the run is the widest of `specs`; the old and new bounds start. */
  expectChange(specs: readonly PolicySpec[], change: PolicyChangeBounds): void;
  /** The proposal the run changes to, if any. */
  readonly finalProposal: string | undefined;
  /** Admissions from this instant on feed the new oracle (every region completed the last version). */
  newBoundFrom(us: number): void;
  /** Whether the new bound's start is still unknown. */
  readonly awaitingNewBound: boolean;
  readonly admitted: number;
  /** Worst window excess (scaled as the oracle reports it). */
  readonly worstWindowExcess: number;
  /** Admitted over the measured part of the run (for the utilization). */
  readonly admittedInWindow: number;
  readonly measureFromUs: number;
}

export function createG1Checker(w: World): G1Checker {
  const { opts, clock } = w;
  const { windowAlg, windowMs } = w.policies;
  let boundCapacity = opts.capacity;
  let change:
    | {
        readonly finalProposal: string;
        readonly oracleOld: WindowOracle;
        readonly oracleNew: WindowOracle;
        readonly firstShrinkUs: number;
        newFromUs: number;
      }
    | undefined;
  let oracle = new WindowOracle(opts.capacity, opts.refillPerSecond);
  const perWindow = new Map<number, number>();
  let admittedWindowAlg = 0;
  let worstPerWindowExcess = Number.NEGATIVE_INFINITY;
  let admittedInWindow = 0;
  const measureFromUs = opts.demand.kind === "hot" ? Math.min(5_000_000, opts.durationUs / 2) : 0;
  const admitWindow = (node: Node, cost: number): void => {
    admittedWindowAlg += cost;
    const k = Math.floor(w.localNow(node) / ((windowMs ?? 1000) * 1000));
    const sum = (perWindow.get(k) ?? 0) + cost;
    perWindow.set(k, sum);
    const excess = sum - opts.capacity;
    if (excess > worstPerWindowExcess) worstPerWindowExcess = excess;
    if (excess > 0) w.fail(`window ${k} (${opts.algorithm}): ${sum} admitted > C = ${opts.capacity}`);
  };
  return {
    admit(cost, node) {
      if (windowAlg) {
        admitWindow(node, cost);
        return;
      }
      const now = clock.nowUs();
      oracle.admit(now, cost);
      if (oracle.violation !== undefined) w.fail(oracle.violation);
      if (change !== undefined) {
        if (now < change.firstShrinkUs) {
          change.oracleOld.admit(now, cost);
          if (change.oracleOld.violation !== undefined) w.fail(`old policy: ${change.oracleOld.violation}`);
        }
        if (now >= change.newFromUs) {
          change.oracleNew.admit(now, cost);
          if (change.oracleNew.violation !== undefined) w.fail(`new policy: ${change.oracleNew.violation}`);
        }
      }
      if (now >= measureFromUs && now < opts.durationUs) admittedInWindow += cost;
    },
    get boundCapacity() {
      return boundCapacity;
    },
    expectChange(specs, c) {
      boundCapacity = Math.max(...specs.map((x) => x.capacity));
      const boundRate = Math.max(...specs.map((x) => x.refillPerSecond));
      oracle = new WindowOracle(boundCapacity, boundRate);
      const oldSpec = w.policies.oldSpec;
      change = {
        finalProposal: c.finalProposal,
        oracleOld: new WindowOracle(oldSpec.capacity, oldSpec.refillPerSecond),
        oracleNew: new WindowOracle(c.newSpec.capacity, c.newSpec.refillPerSecond),
        // Before the first proposal exists nobody can enforce anything but the seed.
        firstShrinkUs: c.firstShrinkUs,
        // Set once every region completed the last version (observed from their snapshots).
        newFromUs: Number.POSITIVE_INFINITY,
      };
    },
    get finalProposal() {
      return change?.finalProposal;
    },
    newBoundFrom(us) {
      if (change !== undefined) change.newFromUs = us;
    },
    get awaitingNewBound() {
      return change !== undefined && change.newFromUs === Number.POSITIVE_INFINITY;
    },
    get admitted() {
      return windowAlg ? admittedWindowAlg : oracle.admitted;
    },
    get worstWindowExcess() {
      return windowAlg ? worstPerWindowExcess : oracle.worstExcessScaled / 1e6;
    },
    get admittedInWindow() {
      return admittedInWindow;
    },
    measureFromUs,
  };
}
