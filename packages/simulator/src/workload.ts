// The workload: per region a Poisson stream of checks (cost 1..maxCost), some
// served by leased clients; demand shifting in random phases (or the
// scenario's fixed phases, or one hot region that may move), early lease
// closes; and how long the quota took to follow a moved hot spot.
import { SHARE_UNITS as U } from "@geoquota/core";
import type { G1Checker } from "./check-g1.js";
import type { Limiters } from "./limiters.js";
import type { Node, World } from "./world.js";

export interface Workload {
  /** Starts the demand phases, the arrivals and the early closes. */
  start(): void;
  /** After every event: notes when the moved hot spot's region reached 95% of its target share. */
  observe(): void;
  /** Check cost denied. */
  readonly denied: number;
  /** From the hot spot's move to its region holding ≥ 95% of the target share (µs), if reached. */
  readonly reweightUs: number | undefined;
}

export function createWorkload(w: World, limiters: Limiters, g1: G1Checker): Workload {
  const { opts, clock, workRng, nodes } = w;
  const n = nodes.length;
  const windowAlg = w.policies.windowAlg;
  let denied = 0;
  const hotShareTarget = U - (n - 1) * opts.floorPpm;
  let reweightUs: number | undefined;
  let hotIndex = 0;
  const arrival = (node: Node): void => {
    if (!w.demandOn) return;
    const rate = node.demandPerSec;
    if (rate <= 0) {
      clock.schedule(100_000, () => arrival(node));
      return;
    }
    const cost = opts.maxCost > 1 ? workRng.int(1, opts.maxCost) : 1;
    const allowed =
      node.clients.length > 0 && workRng.chance(opts.clients.leasedFraction)
        ? limiters.serveLeased(node, workRng.pick(node.clients), cost)
        : limiters.check(node, cost);
    if (allowed) g1.admit(cost, node);
    else denied += cost;
    const meanGapUs = 1e6 / rate;
    clock.schedule(Math.max(1, Math.round(workRng.exponential(meanGapUs))), () => arrival(node));
  };
  // A window algorithm's derived refill (C per window) is no demand scale: every region over its
  // slice most of the time needs the scenario's r.
  const rateNow = (): number =>
    windowAlg ? opts.refillPerSecond : (nodes[0]?.view.limit.refillPerSecond ?? opts.refillPerSecond);
  const setPhase = (): void => {
    if (opts.demand.kind === "phases") return;
    if (opts.demand.kind === "hot") {
      nodes.forEach((x, i) => {
        x.demandPerSec =
          i === hotIndex ? opts.refillPerSecond * (opts.demand.kind === "hot" ? opts.demand.ratio : 0) : 0;
      });
      return;
    }
    const r = rateNow();
    if (workRng.chance(0.6)) {
      const hot = workRng.int(0, n - 1);
      nodes.forEach((x, i) => {
        x.demandPerSec = i === hot ? r * workRng.floatIn(1, 2.5) : r * workRng.floatIn(0, 0.2 / n);
      });
    } else {
      for (const x of nodes) x.demandPerSec = r * workRng.floatIn(0, 2.5 / n);
    }
    clock.schedule(workRng.int(1_000_000, 4_000_000), setPhase);
  };

  const start = (): void => {
    setPhase();
    if (opts.demand.kind === "phases") {
      for (const ph of opts.demand.phases) {
        clock.at(ph.atUs, () => {
          nodes.forEach((x, i) => {
            x.demandPerSec = opts.refillPerSecond * (ph.rates[i] ?? 0);
          });
        });
      }
    }
    for (const node of nodes) clock.schedule(workRng.int(0, 10_000), () => arrival(node));
    if (opts.demand.kind === "hot" && opts.demand.shiftAtUs !== undefined) {
      const shiftAt = opts.demand.shiftAtUs;
      clock.at(shiftAt, () => {
        hotIndex = 1;
        setPhase();
      });
    }
    if (opts.clients.closeEveryUs > 0) {
      for (const node of nodes) {
        for (const c of node.clients) {
          const next = (): void => {
            if (!w.demandOn) return;
            limiters.closeEarly(node, c);
            clock.schedule(Math.round(workRng.exponential(opts.clients.closeEveryUs)) + 1, next);
          };
          clock.schedule(Math.round(workRng.exponential(opts.clients.closeEveryUs)) + 1, next);
        }
      }
    }
  };

  const observe = (): void => {
    if (reweightUs === undefined && opts.demand.kind === "hot" && opts.demand.shiftAtUs !== undefined) {
      const shiftAt = opts.demand.shiftAtUs;
      const node = nodes[1];
      if (
        node !== undefined &&
        clock.nowUs() >= shiftAt &&
        node.redis.shareAt(node.view.limit, w.localNow(node)) >= 0.95 * hotShareTarget
      ) {
        reweightUs = clock.nowUs() - shiftAt;
      }
    }
  };

  return {
    start,
    observe,
    get denied() {
      return denied;
    },
    get reweightUs() {
      return reweightUs;
    },
  };
}
