// The whole-protocol simulation: N regions (Redis via @geoquota/lease, a
// daemon each) on one SimClock and a faulty SimNetwork, a shifting random
// workload, faults, and the checkers run after EVERY event:
//   - Σ_i s_i(t) ≤ U at the real instant t, each s_i read at its own clock
//     (t + offset_i); the instants where a share changes without a script
//     (deadline ± ε, recovery end) are scheduled as events so none is skipped;
//   - G1, exact, at every admission (WindowOracle);
//   - at the end, after healing and a quiet phase: counters converged.
// Integer µs everywhere: every delay the model draws is an integer.
import type { KeyLimit, Timing } from "@geoquota/lease";
import { Rng, SimClock, SimNetwork } from "@geoquota/sim";
import { type RegionQuota, U } from "../policy/index.js";
import { type DaemonStats, type Frame, ModelDaemon } from "./daemon.js";
import { WindowOracle } from "./oracle.js";
import { ModelRegion } from "./region.js";
import type { ModelOptions, ModelResult } from "./types.js";

/** Redis TIME is epoch µs: large, so a fresh cluster (born 0) is long past any recovery. */
const EPOCH_US = 1_700_000_000_000_000;

interface Node {
  readonly id: string;
  readonly offsetUs: number;
  region: ModelRegion;
  daemon: ModelDaemon | undefined;
  demandPerSec: number;
}

class CheckFailed extends Error {}

export function runModel(opts: ModelOptions): ModelResult {
  const rng = new Rng(opts.seed);
  const clock = new SimClock(0);
  const net = new SimNetwork<Frame>({
    clock,
    rng: rng.fork(),
    defaultLink: {
      dropRate: opts.faults.dropRate,
      duplicateRate: opts.faults.duplicateRate,
      latencyUs: (r) => r.int(opts.faults.latencyMinUs, opts.faults.latencyMaxUs),
    },
  });
  const workRng = rng.fork();
  const faultRng = rng.fork();
  const timing: Timing = { epsilonUs: opts.epsilonUs, loanDurationUs: opts.loanDurationUs };
  const n = opts.regions;
  const ids = Array.from({ length: n }, (_, i) => `r${i}`);
  const quotas: RegionQuota[] = ids.map((region, i) => ({
    region,
    baseShare: i === 0 ? U - Math.floor(U / n) * (n - 1) : Math.floor(U / n),
    floorShare: opts.floorPpm,
  }));
  const half = Math.floor(opts.clockSpreadUs / 2);
  const stats: DaemonStats = { grants: 0, returns: 0 };
  const oracle = new WindowOracle(opts.capacity, opts.refillPerSecond);
  let failure: string | undefined;
  let worstShareExcess = Number.NEGATIVE_INFINITY;
  let denied = 0;
  const pending = new Set<number>();

  const fail = (msg: string): never => {
    failure = `seed ${opts.seed} (replay: GQ_SEED=${opts.seed}) at t=${clock.nowUs()} µs: ${msg}`;
    throw new CheckFailed(failure);
  };

  const nodes: Node[] = ids.map((id, i) => {
    // The extremes ±spread/2 are drawn often: the bound is tight there.
    const offsetUs = i < 2 && opts.clockSpreadUs > 0 ? (i === 0 ? -half : half) : workRng.int(-half, half);
    const limit: KeyLimit = {
      algorithm: "token_bucket",
      capacity: opts.capacity,
      refillPerSecond: opts.refillPerSecond,
      baseShare: quotas[i]?.baseShare ?? 0,
      floorShare: opts.floorPpm,
    };
    return {
      id,
      offsetUs,
      region: new ModelRegion(id, limit, timing, opts.bugs, EPOCH_US + offsetUs),
      daemon: undefined,
      demandPerSec: 0,
    };
  });
  const localNow = (node: Node): number => clock.nowUs() + EPOCH_US + node.offsetUs;

  // Breakpoints of a region's share become (no-op) events, so the per-event
  // check also runs at every instant a share changes without a script.
  const scheduleBreakpoints = (node: Node): void => {
    for (const bp of node.region.breakpoints(localNow(node))) {
      const real = bp - EPOCH_US - node.offsetUs;
      if (pending.has(real)) continue;
      pending.add(real);
      clock.at(real, () => pending.delete(real));
    }
  };

  const checkShares = (): void => {
    let sum = 0;
    for (const node of nodes) sum += node.region.shareAt(localNow(node));
    if (sum - U > worstShareExcess) worstShareExcess = sum - U;
    if (sum > U) {
      const parts = nodes.map((x) => `${x.id}=${x.region.shareAt(localNow(x))}`).join(" ");
      fail(`Σ shares ${sum} > U (${parts})`);
    }
  };

  // ---- daemons and rounds
  const startDaemon = (node: Node): void => {
    const peers = ids.filter((p) => p !== node.id);
    node.daemon = new ModelDaemon(
      {
        region: node.region,
        peers,
        quotas,
        refillPerSecond: opts.refillPerSecond,
        fullSyncEveryRounds: opts.fullSyncEveryRounds,
        nowUs: () => localNow(node),
        send: (to, frame) => net.send(node.id, to, frame),
        touched: () => scheduleBreakpoints(node),
        relendBorrowed: opts.bugs.relendBorrowed === true,
      },
      stats,
    );
    const d = node.daemon;
    const tick = (): void => {
      if (node.daemon !== d) return; // a restarted daemon's old timer
      d.round();
      clock.schedule(workRng.int(opts.roundMinUs, opts.roundMaxUs), tick);
    };
    clock.schedule(workRng.int(0, opts.roundMaxUs), tick);
  };
  for (const node of nodes) {
    net.addNode(node.id, (from, frame) => node.daemon?.receive(from, frame));
    startDaemon(node);
  }

  // ---- workload
  let demandOn = true;
  let admittedInWindow = 0;
  const measureFromUs = opts.demand.kind === "hot" ? Math.min(5_000_000, opts.durationUs / 2) : 0;
  const hotShareTarget = U - (n - 1) * opts.floorPpm;
  let reweightUs: number | undefined;
  let hotIndex = 0;
  const arrival = (node: Node): void => {
    if (!demandOn) return;
    const rate = node.demandPerSec;
    if (rate <= 0) {
      clock.schedule(100_000, () => arrival(node));
      return;
    }
    const cost = opts.maxCost > 1 ? workRng.int(1, opts.maxCost) : 1;
    const now = clock.nowUs();
    if (node.region.check(cost, localNow(node))) {
      oracle.admit(now, cost);
      if (oracle.violation !== undefined) fail(oracle.violation);
      if (now >= measureFromUs && now < opts.durationUs) admittedInWindow += cost;
    } else {
      denied += cost;
    }
    const meanGapUs = 1e6 / rate;
    clock.schedule(Math.max(1, Math.round(workRng.exponential(meanGapUs))), () => arrival(node));
  };
  const setPhase = (): void => {
    if (opts.demand.kind === "phases") return;
    if (opts.demand.kind === "hot") {
      nodes.forEach((x, i) => {
        x.demandPerSec =
          i === hotIndex ? opts.refillPerSecond * (opts.demand.kind === "hot" ? opts.demand.ratio : 0) : 0;
      });
      return;
    }
    const r = opts.refillPerSecond;
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

  // ---- faults
  const faultWindow = (): number => faultRng.int(500_000, Math.max(600_000, opts.durationUs - 1_000_000));
  if (opts.faults.partitionEveryUs > 0) {
    const partition = (): void => {
      if (!demandOn) return;
      const shuffled = faultRng.shuffle([...ids]);
      const k = faultRng.int(1, n - 1);
      net.partition(shuffled.slice(0, k), shuffled.slice(k), { oneWay: faultRng.chance(0.2) });
      clock.schedule(faultRng.int(500_000, 5_000_000), () => net.heal());
      clock.schedule(Math.round(faultRng.exponential(opts.faults.partitionEveryUs)) + 1, partition);
    };
    clock.schedule(Math.round(faultRng.exponential(opts.faults.partitionEveryUs)) + 1, partition);
  }
  for (const iso of opts.faults.isolations ?? []) {
    const id = ids[iso.isolate];
    if (id === undefined) continue;
    clock.at(iso.atUs, () => net.isolate(id));
    clock.at(iso.untilUs, () => net.heal());
  }
  for (let i = 0; i < opts.faults.stateLosses; i++) {
    const node = faultRng.pick(nodes);
    clock.at(faultWindow(), () => {
      node.region.wipe(localNow(node));
      scheduleBreakpoints(node);
    });
  }
  for (let i = 0; i < opts.faults.daemonRestarts; i++) {
    const node = faultRng.pick(nodes);
    const at = faultWindow();
    const downUs = faultRng.int(0, 1_000_000);
    clock.at(at, () => {
      node.daemon = undefined;
      clock.schedule(downUs, () => {
        if (node.daemon === undefined) startDaemon(node);
      });
    });
  }
  clock.at(opts.durationUs, () => {
    demandOn = false;
    net.heal();
    net.setDefaultLink({ dropRate: 0, duplicateRate: 0 });
    for (const node of nodes) if (node.daemon === undefined) startDaemon(node);
  });

  // ---- run, checking after every event
  const endUs = opts.durationUs + opts.quiesceUs;
  try {
    checkShares();
    while (clock.nowUs() <= endUs && clock.step()) {
      checkShares();
      if (reweightUs === undefined && opts.demand.kind === "hot" && opts.demand.shiftAtUs !== undefined) {
        const shiftAt = opts.demand.shiftAtUs;
        const node = nodes[1];
        if (
          node !== undefined &&
          clock.nowUs() >= shiftAt &&
          node.region.shareAt(localNow(node)) >= 0.95 * hotShareTarget
        ) {
          reweightUs = clock.nowUs() - shiftAt;
        }
      }
    }
    const first = nodes[0];
    if (first !== undefined) {
      for (const node of nodes.slice(1)) {
        if (!sameCounters(first.region.key.counters, node.region.key.counters)) {
          fail(`counters of ${first.id} and ${node.id} did not converge after heal`);
        }
      }
    }
  } catch (e) {
    if (!(e instanceof CheckFailed)) throw e;
  }
  const measuredUs = opts.durationUs - measureFromUs;
  return {
    seed: opts.seed,
    ok: failure === undefined,
    failure,
    admitted: oracle.admitted,
    denied,
    worstShareExcess,
    worstWindowExcess: oracle.worstExcessScaled / 1e6,
    utilization: measuredUs > 0 ? (admittedInWindow * 1e6) / (opts.refillPerSecond * measuredUs) : 0,
    reweightUs,
    loansGranted: stats.grants,
    returns: stats.returns,
    events: clock.executed,
  };
}

function sameCounters(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
