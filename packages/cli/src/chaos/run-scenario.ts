// Runs one planned scenario against a running chaos cluster: a fresh tenant,
// open-loop skewed traffic to every region (the demo's generator), shares and
// counters sampled every 40 ms, the faults injected and healed on the plan's
// timeline; then the verdicts: the exact global bound (the sim oracle, whole
// run and every sub-interval), Σ shares ≤ U, counter convergence after each
// heal, fail-closed while a limiter's Redis is away. Nothing here prints: the
// caller formats the result (report.ts).
import { loadRegionConfig } from "@geoquota/config";
import { leasedHeldBound } from "@geoquota/limiter/internal";
import { checkGlobalBound, type OracleVerdict } from "@geoquota/sim";
import type { Cluster } from "../cluster/orchestrator.js";
import { OUTCOME, RequestLog } from "../demo/request-log.js";
import { realClock } from "../demo/scenarios.js";
import { TrafficGenerator } from "../demo/traffic.js";
import {
  checkFailClosed,
  checkShareSum,
  clockStepWindows,
  convergenceAfter,
  convergenceLateness,
  quietFrom,
  latencyPercentiles,
  type FailClosedVerdict,
  linksUpAfter,
  rateOfR,
  type ShareSumVerdict,
  type StateLoss,
} from "./checks.js";
import { CHAOS_RESOURCE, LEASED } from "./cluster.js";
import { FAULT_CLASS, laneOf, makeFault } from "./faults.js";
import { Rng } from "@geoquota/sim";
import { QuotaSampler } from "./sampler.js";
import type { ScenarioPlan } from "./scenarios.js";
import { chaosSender } from "./sender.js";
import { WAN_ONE_WAY_MIN_MS } from "./toxics.js";

export interface RunOptions {
  readonly cluster: Cluster;
  readonly plan: ScenarioPlan;
  readonly tenant: string;
  readonly durationMs: number;
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  readonly leasedRegion: string;
  /**
   * Counters must converge within this once every link is up again after a
   * heal (2 rounds of the slowest interval). Measured from the links being up,
   * not from the heal: re-dialing is the transport's backoff (up to its 5 s
   * cap), reported separately as linksUpMs.
   */
  readonly convergenceMaxMs?: number;
  /** How long to keep sampling after the traffic stops, waiting for convergence. */
  readonly convergenceWaitMs?: number;
  readonly signal?: AbortSignal;
  /** Shifting load (the soak): the demand from each `atMs` on; `plan.demand` before the first. */
  readonly demandSchedule?: ReadonlyArray<{
    readonly atMs: number;
    readonly demand: Readonly<Record<string, number>>;
  }>;
  /**
   * Long runs (the soak): a loss of a region's state more than this long
   * after a heal does not take that region's view out of the heal's target
   * (it was gossiped by then). Losses before the heal count from their
   * injection, whatever its distance (checks.ts `convergenceAfter`). Unset:
   * any later loss in the run counts.
   */
  readonly lossWindowMs?: number;
  /** How long a check may take before it counts as unanswered (default: the sender's, 5 s). */
  readonly requestTimeoutMs?: number;
  /** Bound on stored quota samples (default: the sampler's). */
  readonly samplesMax?: number;
}

export interface FaultRecord {
  readonly kind: string;
  readonly label: string;
  readonly region: string;
  /** Client ms from the scenario start: inject returned, heal started, heal returned. */
  readonly injectedMs: number;
  readonly healStartMs: number;
  readonly healedMs: number;
  /** From the heal until every daemon saw all its links up. */
  readonly linksUpMs: number | null;
  /**
   * Client ms the 1 s convergence limit is counted from: the daemons
   * reconnected after the heal, or after a later fault that overlapped the
   * convergence window healed. Null when counters converged before that.
   */
  readonly reconnectedAtMs: number | null;
  /** From the heal until every region's counters reached what any surviving region knew at the heal. */
  readonly convergenceMs: number | null;
  /** A multi-step fault's steps (faults.ts `Fault.steps`). */
  readonly steps?: readonly { readonly what: string; readonly atMs: number }[];
}

export interface ScenarioResult {
  readonly name: string;
  readonly seed: number;
  readonly tenant: string;
  /** Region ids in the cluster's order (the index of every per-region array here). */
  readonly regions: readonly string[];
  readonly description: string;
  readonly guarantees: readonly string[];
  readonly hot: string;
  readonly demand: Readonly<Record<string, number>>;
  readonly durationMs: number;
  readonly ok: boolean;
  readonly failures: readonly string[];
  readonly bound: OracleVerdict;
  readonly shares: ShareSumVerdict;
  readonly faults: readonly FaultRecord[];
  readonly failClosed: readonly FailClosedVerdict[];
  /** Admitted ÷ the whole run's bound C + r·T. */
  readonly utilization: number;
  /** Admitted rate ÷ r from the last heal (+1 s) to the end; null when that window is too short. */
  readonly rateAfterHealOfR: number | null;
  readonly requests: { sent: number; answered: number; errors: number; shed: number };
  /**
   * Check latency seen by the clients (G3: no request waits on gossip): before
   * any fault, and while a gossip-class fault was active.
   */
  readonly latency: {
    readonly beforeFaults: { count: number; p50Ms: number; p99Ms: number };
    readonly duringGossipFaults: { count: number; p50Ms: number; p99Ms: number };
  };
  readonly samples: { count: number; misses: number; linkSamples: number };
}

/** Pairing window for Σ shares: strictly below the smallest one-way gossip delay (see checks.ts). */
export const SHARE_PAIRING_MS = WAN_ONE_WAY_MIN_MS - 5;

export async function runScenario(o: RunOptions): Promise<ScenarioResult> {
  const { cluster, plan } = o;
  const ids = cluster.regions.map((r) => r.id);
  const idx = (id: string) => ids.indexOf(id);
  const origin = performance.now();
  const now = () => performance.now() - origin;
  const L = o.durationMs;
  const rng = new Rng(plan.seed);
  const key = { tenant: o.tenant, resource: CHAOS_RESOURCE, ...o.limit };
  const rateOf = (d: Readonly<Record<string, number>>) => Object.values(d).reduce((a, b) => a + b, 0);
  const totalRate = Math.max(rateOf(plan.demand), ...(o.demandSchedule ?? []).map((p) => rateOf(p.demand)));
  const log = new RequestLog(Math.ceil((totalRate * L) / 1000) * 2 + 1000);
  const sender = chaosSender(
    cluster.regions.map((r) => r.url),
    now,
    o.requestTimeoutMs !== undefined ? { timeoutMs: o.requestTimeoutMs } : {},
  );
  const traffic = new TrafficGenerator({ regionIds: ids, keys: [key], log, send: sender.send, now });
  const sampler = new QuotaSampler({
    urls: cluster.regions.map((r) => r.url),
    gossipUrls: cluster.regions.map((r) => r.gossipUrl),
    tenant: o.tenant,
    resource: CHAOS_RESOURCE,
    now,
    ...(o.samplesMax !== undefined ? { samplesMax: o.samplesMax } : {}),
  });
  const failures: string[] = [];
  // Each fault runs as its own task on the shared timeline (inject at its
  // start, heal at its end), so a slow action (a daemon restart takes
  // seconds here) never delays another fault. The plan keeps faults of one
  // class apart, so concurrent tasks never touch the same thing.
  const faults = plan.faults.map((f, i) => ({
    plan: f,
    fault: makeFault(f.kind, { cluster, rng: rng.fork(), id: `f${i}`, region: f.region, peer: f.peer, now }),
    injectedMs: Number.NaN,
    healStartMs: Number.NaN,
    healedMs: Number.NaN,
  }));
  const until = async (atMs: number) => {
    const wait = atMs - now();
    if (wait > 0) await realClock.sleep(wait, o.signal);
  };
  // A fault waits for the previous fault of its lane to finish healing: on a
  // loaded machine a restart can outlast its plan, two faults on one daemon or
  // one Redis at once would undo each other, and a link fault's toxics touched
  // around a daemon kill can deadlock Toxiproxy (faults.ts FAULT_LANE). Plans
  // keep them apart on paper; the soak's plans are dense.
  const laneDone = new Map<string, Promise<void>>();
  const runFault = (f: (typeof faults)[number]): Promise<void> => {
    const lane = laneOf(f.plan.kind);
    const previous = laneDone.get(lane) ?? Promise.resolve();
    const done = previous.then(() => runOneFault(f));
    laneDone.set(lane, done);
    return done;
  };
  const runOneFault = async (f: (typeof faults)[number]) => {
    let injected = false;
    try {
      await until(f.plan.startFrac * L);
      if (o.signal?.aborted) return;
      injected = true;
      await f.fault.inject();
      f.injectedMs = now();
      await until(Math.max(f.plan.endFrac * L, now()));
    } catch (err) {
      failures.push(`inject ${f.fault.label}: ${(err as Error).message}`);
    } finally {
      // Heal even after a failed or aborted inject, so the cluster stays usable.
      if (injected) {
        f.healStartMs = now();
        await f.fault.heal().catch((err: Error) => failures.push(`heal ${f.fault.label}: ${err.message}`));
        f.healedMs = now();
      }
    }
  };
  sampler.start();
  traffic.setDemand([plan.demand]);
  traffic.start();
  const shiftLoad = async () => {
    for (const p of o.demandSchedule ?? []) {
      await until(p.atMs);
      if (o.signal?.aborted || now() >= L) return;
      traffic.setDemand([p.demand]);
    }
  };
  try {
    await Promise.all([...faults.map(runFault), shiftLoad(), until(L)]);
  } finally {
    await traffic.stop();
  }
  for (const f of faults) if (Number.isNaN(f.injectedMs)) failures.push(`not injected: ${f.fault.label}`);

  // Keep sampling (no traffic) until every heal converged and every daemon
  // reconnected, or the wait ends. A heal's target ignores a region's last
  // view before it when that region lost its state after the view was asked
  // for (what it had not gossiped is gone by design); those regions must
  // still re-learn what the others knew.
  const convergenceMaxMs = o.convergenceMaxMs ?? 1000;
  const losses: StateLoss[] = faults.flatMap((f) =>
    f.fault.lostRegion === undefined || !Number.isFinite(f.injectedMs)
      ? []
      : [{ region: idx(f.fault.lostRegion), atMs: f.injectedMs }],
  );
  const heals = faults.filter((f) => Number.isFinite(f.healedMs));
  const waitUntil = Math.max(now(), ...heals.map((f) => f.healedMs)) + (o.convergenceWaitMs ?? 8000);
  const measure = () =>
    heals.map((f) => ({
      convergenceMs: convergenceAfter(sampler.samples, ids.length, f.healedMs, losses, o.lossWindowMs),
      linksUpMs: linksUpAfter(sampler.links, ids.length, f.healedMs),
    }));
  let m = measure();
  while (
    m.some((x) => x.convergenceMs === null || x.linksUpMs === null) &&
    now() < waitUntil &&
    !o.signal?.aborted
  ) {
    await realClock.sleep(200, o.signal);
    m = measure();
  }
  await sampler.stop();
  await sender.close();

  // Verdicts.
  const admissions = log.admissions(0);
  const bound = checkGlobalBound(admissions, o.limit);
  if (!bound.ok)
    failures.push(
      `global bound VIOLATED: worst interval admitted ${bound.worstInterval?.admitted} > bound ${bound.worstInterval?.bound.toFixed(2)} (excess ${bound.worstExcess.toFixed(2)})`,
    );
  const shares = checkShareSum(sampler.samples, ids.length, {
    maxSpreadMs: SHARE_PAIRING_MS,
    unclaimed: clockStepWindows(faults, loadRegionConfig(cluster.regions[0]!.configPath)),
  });
  if (!shares.ok) failures.push(`Σ shares VIOLATED: max ${shares.maxSumPpm} ppm > 1000000`);
  if (shares.groupsChecked === 0) failures.push("Σ shares: no sample group close enough to check");
  const faultRecords: FaultRecord[] = heals.map((f, i) => {
    const convergenceMs = m[i]?.convergenceMs ?? null;
    let reconnectedAtMs: number | null = null;
    if (convergenceMs !== null) {
      const convergedAt = f.healedMs + convergenceMs;
      const from = quietFrom(
        f.healedMs,
        convergedAt,
        heals.filter((g) => g !== f),
      );
      const up = from < convergedAt ? linksUpAfter(sampler.links, ids.length, from) : null;
      if (up !== null && from + up <= convergedAt) reconnectedAtMs = from + up;
    }
    return {
      kind: f.plan.kind,
      label: f.fault.label,
      region: f.plan.region,
      injectedMs: f.injectedMs,
      healStartMs: f.healStartMs,
      healedMs: f.healedMs,
      linksUpMs: m[i]?.linksUpMs ?? null,
      reconnectedAtMs,
      convergenceMs,
      ...(f.fault.steps ? { steps: f.fault.steps } : {}),
    };
  });
  for (const r of faultRecords) {
    if (r.convergenceMs === null) {
      failures.push(`counters did not converge after: ${r.label}`);
      continue;
    }
    const late =
      r.reconnectedAtMs === null ? 0 : convergenceLateness(r.healedMs + r.convergenceMs, r.reconnectedAtMs);
    if (late > convergenceMaxMs)
      failures.push(
        `counters converged ${Math.round(late)} ms after the daemons reconnected (> ${convergenceMaxMs} ms): ${r.label}`,
      );
  }
  const failClosed = heals
    .filter((r) => r.fault.redisCutRegion !== undefined)
    .map((r) => {
      const region = r.fault.redisCutRegion!;
      return checkFailClosed(sender.records, {
        region: idx(region),
        regionId: region,
        cutMs: r.injectedMs,
        healMs: r.healStartMs,
        leasedMax: region === o.leasedRegion ? leasedHeldBound(LEASED) : 0,
        breakerMs: 1000,
      });
    });
  for (const f of failClosed)
    if (!f.ok)
      failures.push(
        `fail-closed broken in ${f.region}: admitted ${f.admittedDuringCut} (leased max ${f.leasedMax}), ${f.notDegraded} answers not degraded`,
      );
  const lastHeal = Math.max(0, ...faultRecords.map((r) => r.healedMs));
  let errors = 0;
  for (const r of log.records()) if (r.outcome === OUTCOME.error) errors++;
  // An errored request may have been admitted unseen: the bound check would be blind to it.
  if (errors > 0) failures.push(`${errors} requests got no answer: the oracle cannot count them`);
  return {
    name: plan.name,
    seed: plan.seed,
    tenant: o.tenant,
    regions: ids,
    description: plan.description,
    guarantees: plan.guarantees,
    hot: plan.hot,
    demand: plan.demand,
    durationMs: L,
    ok: failures.length === 0,
    failures,
    bound,
    shares,
    faults: faultRecords,
    failClosed,
    utilization: bound.bound > 0 ? bound.admitted / bound.bound : 0,
    rateAfterHealOfR:
      lastHeal + 1000 < L - 1000 ? rateOfR(admissions, o.limit.refillPerSecond, lastHeal + 1000, L) : null,
    requests: {
      sent: traffic.counters.sent,
      answered: log.size - errors,
      errors,
      shed: traffic.counters.shed,
    },
    latency: {
      beforeFaults: latencyPercentiles(sender.records, [
        [0, Math.min(L, ...faults.map((f) => f.plan.startFrac * L))],
      ]),
      duringGossipFaults: latencyPercentiles(
        sender.records,
        faults
          .filter((f) => FAULT_CLASS[f.plan.kind] === "gossip")
          .map((f): [number, number] => [f.injectedMs, f.healStartMs]),
      ),
    },
    samples: { count: sampler.samples.length, misses: sampler.misses, linkSamples: sampler.links.length },
  };
}
