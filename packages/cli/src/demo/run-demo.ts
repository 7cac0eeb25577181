// `geoquota demo` end to end: start a local cluster, drive open-loop traffic
// through the scenarios with a live view, stop everything, then judge the run
// with the exact oracle and write the report. The cluster is stopped before
// the (possibly slow) verdict and report, and always: on success, on error,
// and when `signal` aborts (SIGINT/SIGTERM in the CLI). With the stream
// scenario, per region a metered WebSocket server and a flood client of one
// tenant run too (stream-rig.ts); they are stopped before the cluster, and
// the tenant's streamed bytes get their own exact verdict. The steps are
// named functions below `runDemo`, in the order it calls them.
import { join } from "node:path";
import { loadPolicies, lookupPolicy, type PolicySet } from "@geoquota/config";
import { repoRoot } from "@geoquota/procs";
import { checkGlobalBound, type OracleVerdict } from "@geoquota/sim";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import { flushRegion, recoveryEnd } from "./faults.js";
import { type LiveState, type LiveStream, renderLine, ttyFrame } from "./live-view.js";
import { ClusterPoller } from "./poller.js";
import type { ReportData } from "./report.js";
import { writeReport } from "./report-files.js";
import { OUTCOME, RequestLog } from "./request-log.js";
import {
  type PlannedScenario,
  planScenarios,
  realClock,
  runSchedule,
  type ScheduleClock,
} from "./scenarios.js";
import { admittedSoFar, cumulativeSeries, rateSeries, recentRates } from "./series.js";
import {
  mergePolicyFiles,
  recentStreamRates,
  type StreamRig,
  type StreamRigOptions,
  startStreamRig,
  streamRateSeries,
} from "./stream-rig.js";
import {
  boundLines,
  shareReachedAfter,
  streamBoundLines,
  streamRate,
  streamRateLine,
  utilization,
  utilizationLine,
} from "./summary.js";
import type { ClusterSample, Demand, DemoKey, FaultWindow, ScenarioName, Writer } from "./types.js";
import { httpCheckSender, TrafficGenerator } from "./traffic.js";

export const MAIN_KEY = { tenant: "cust_ent_9942", resource: "payments_checkout" } as const;
/** A little traffic on other tenants: a free tier key and the resource's default ("*") policy. */
const SIDE_KEYS = [
  { tenant: "cust_free_1018", resource: "payments_checkout", ratePerRegion: 1 },
  { tenant: "anonymous", resource: "payments_checkout", ratePerRegion: 0.5 },
] as const;

export interface DemoOptions {
  readonly durationMs: number;
  readonly scenarios: readonly ScenarioName[];
  readonly tty: boolean;
  readonly reportPath: string;
  readonly write: Writer;
  readonly signal?: AbortSignal;
  readonly startCluster: (o: ClusterOptions) => Promise<Cluster>;
  /** Global demand for the main key, requests per second (default 150, ≈ 9× r). */
  readonly totalRatePerSecond?: number;
  readonly regions?: number;
  /** Starts the stream scenario's servers and clients (default: the real ones, on each region's Redis). */
  readonly startStream?: (o: StreamRigOptions) => Promise<StreamRig>;
  /** Policies merged into the cluster's for the stream scenario (default regions/stream-policies.json). */
  readonly streamPoliciesFile?: string;
}

export interface DemoResult {
  readonly exitCode: number;
  readonly ok: boolean;
  readonly verdict: OracleVerdict;
  /** The stream tenant's verdict, when the run had the stream scenario. */
  readonly streamVerdict?: OracleVerdict;
  readonly summary: readonly string[];
  readonly reportPath: string;
  readonly jsonPath: string;
}

const HOT = "us-east";
const FLUSHED = "eu-west";

/**
 * The demo in four named steps: start the cluster (`startDemoCluster`), set
 * the run up and drive the traffic phases with the live view
 * (`planRun`, `driveTraffic`; everything is stopped at its end, always), judge
 * what the client recorded (`judge`), then write the report (`writeDemoReport`).
 */
export async function runDemo(o: DemoOptions): Promise<DemoResult> {
  const cluster = await startDemoCluster(o);
  const run = planRun(o, cluster);
  const traffic = await driveTraffic(o, cluster, run);
  const endMs = run.now();
  const judged = judge(o, run, traffic);
  return writeDemoReport(o, run, traffic, judged, endMs);
}

/** Starts the local cluster (gossip behind Toxiproxy for the partition scenario; stream policies merged in). */
async function startDemoCluster(o: DemoOptions): Promise<Cluster> {
  const write = o.write;
  const needsToxiproxy = o.scenarios.includes("partition");
  const withStream = o.scenarios.includes("stream");
  write(
    `starting a local cluster (${o.regions ?? 3} regions${needsToxiproxy ? ", gossip behind Toxiproxy" : ""}${withStream ? ", stream policies merged in" : ""})…\n`,
  );
  // Every limiter and daemon reads one policies file: for the stream scenario,
  // the demo's request policies plus the stream_* ones (the cluster copies it).
  const merged = withStream
    ? mergePolicyFiles(
        join(repoRoot, "regions", "policies.json"),
        o.streamPoliciesFile ?? join(repoRoot, "regions", "stream-policies.json"),
      )
    : undefined;
  try {
    return await o.startCluster({
      regions: o.regions ?? 3,
      toxiproxy: needsToxiproxy,
      ...(merged ? { policiesFile: merged.path } : {}),
    });
  } finally {
    merged?.cleanup();
  }
}

/** What the run is made of, fixed before the traffic starts. */
interface DemoRun {
  readonly ids: readonly string[];
  readonly policies: PolicySet;
  /** The main key first, then the side keys. */
  readonly keys: readonly DemoKey[];
  readonly main: DemoKey;
  readonly hot: string;
  readonly plan: readonly PlannedScenario[];
  readonly log: RequestLog;
  readonly origin: number;
  /** ms since `origin`. */
  readonly now: () => number;
  readonly clock: ScheduleClock;
}

function planRun(o: DemoOptions, cluster: Cluster): DemoRun {
  const ids = cluster.regions.map((r) => r.id);
  const policies = loadPolicies(cluster.policiesPath, ids);
  const keys: DemoKey[] = [MAIN_KEY, ...SIDE_KEYS].map((k) => {
    const spec = lookupPolicy(policies, k.tenant, k.resource);
    return {
      tenant: k.tenant,
      resource: k.resource,
      capacity: spec.capacity,
      refillPerSecond: spec.refillPerSecond,
    };
  });
  const main = keys[0]!;
  const hot = ids.includes(HOT) ? HOT : ids[0]!;
  const flushed = ids.includes(FLUSHED) ? FLUSHED : (ids[1] ?? ids[0]!);
  const totalRate = o.totalRatePerSecond ?? 150;
  const plan = planScenarios(o.scenarios, o.durationMs, {
    regionIds: ids,
    totalRatePerSecond: totalRate,
    hotRegion: hot,
    flushRegion: flushed,
  });
  // Room for every request the plan can send, with margin; the generator stops at the cap.
  const sideRate = SIDE_KEYS.reduce((s, k) => s + k.ratePerRegion * ids.length, 0);
  const log = new RequestLog(
    Math.min(2_000_000, Math.ceil((((totalRate + sideRate) * o.durationMs) / 1000) * 1.2) + 1000),
  );
  const origin = performance.now();
  const now = () => performance.now() - origin;
  const clock: ScheduleClock = { now, sleep: realClock.sleep };
  return { ids, policies, keys, main, hot, plan, log, origin, now, clock };
}

/** What the traffic phases leave behind for the verdict and the report. */
interface TrafficOutcome {
  readonly interrupted: boolean;
  readonly faults: FaultWindow[];
  readonly flushes: ReadonlyArray<{ region: string; atMs: number; window: FaultWindow }>;
  readonly samples: readonly ClusterSample[];
  readonly counters: { readonly sent: number; readonly shed: number };
  readonly rig: StreamRig | undefined;
  readonly streamStart: { atMs: number; endMs: number } | undefined;
  readonly streamPausedMax: number;
}

/**
 * Starts the stream rig (stream scenario), the traffic generator, the pollers
 * and the live view, runs the scenarios' schedule with its faults, then stops
 * all of it and the cluster: on success, on error and when `signal` aborts.
 */
async function driveTraffic(o: DemoOptions, cluster: Cluster, run: DemoRun): Promise<TrafficOutcome> {
  const write = o.write;
  const { ids, keys, main, now, log } = run;
  let traffic: TrafficGenerator | undefined;
  let poller: ClusterPoller | undefined;
  let streamPoller: ClusterPoller | undefined;
  let viewTimer: NodeJS.Timeout | undefined;
  let closeSender: (() => Promise<void>) | undefined;
  let rig: StreamRig | undefined;
  let streamStart: { atMs: number; endMs: number } | undefined;
  let streamPausedMax = 0;
  const faults: FaultWindow[] = [];
  const flushes: Array<{ region: string; atMs: number; window: FaultWindow }> = [];
  let current: PlannedScenario | undefined;
  let interrupted = false;
  try {
    if (o.signal?.aborted) throw new Interrupted();
    if (o.scenarios.includes("stream")) {
      rig = await (o.startStream ?? startStreamRig)({
        regions: cluster.regions.map((r) => ({ id: r.id, redis: r.redis })),
        policies: run.policies,
        tenant: main.tenant,
        originMs: run.origin,
      });
      write(
        `stream servers up in ${ids.length} regions: ${rig.tenant}/${rig.resource} C = ${rig.limit.capacity} B, r = ${rig.limit.refillPerSecond} B/s; each client will offer ${rig.multiple}× r\n`,
      );
    }
    const sender = httpCheckSender(cluster.regions.map((r) => r.url));
    closeSender = sender.close;
    traffic = new TrafficGenerator({ regionIds: ids, keys, log, send: sender.send, now });
    poller = new ClusterPoller(cluster.regions, main.tenant, main.resource, now);
    poller.start();
    if (rig) {
      // The stream key's shares too (the slices its leases come from), once a second.
      streamPoller = new ClusterPoller(cluster.regions, rig.tenant, rig.resource, now, { intervalMs: 1000 });
      streamPoller.start();
    }
    const liveState = (): LiveState => {
      const t = now();
      const rates = recentRates(log, 0, ids.length, t);
      const latest = poller?.latest;
      const so = admittedSoFar(log, 0, main);
      // A fault still open (a state-loss window ends only once recovery is measured,
      // after the run) is shown during its own scenario, not the ones after it.
      const activeFault = faults.find(
        (f) => f.endMs === Number.POSITIVE_INFINITY && f.startMs >= (current?.startMs ?? 0),
      );
      return {
        elapsedMs: t,
        durationMs: o.durationMs,
        scenario: current?.name ?? "starting",
        scenarioDescription: current?.description ?? "",
        fault: activeFault ? activeFault.label : null,
        key: `${main.tenant}/${main.resource}`,
        refillPerSecond: main.refillPerSecond,
        regions: ids.map((id, i) => {
          const v = latest?.regions[id];
          return {
            id,
            sharePpm: v ? v.sharePpm : null,
            recovering: v ? v.recovering : false,
            admittedPerSec: rates.admittedPerSec[i] ?? 0,
            deniedPerSec: rates.deniedPerSec[i] ?? 0,
            errorsPerSec: rates.errorsPerSec[i] ?? 0,
          };
        }),
        admitted: so.admitted,
        bound: so.bound,
        links: Object.entries(latest?.links ?? {}).map(([k, v]) => {
          const [from = "", to = ""] = k.split(">");
          return { from, to, up: v.up, lagMs: v.lagMs };
        }),
        sent: traffic?.counters.sent ?? 0,
        shed: traffic?.counters.shed ?? 0,
        ...(rig ? { stream: liveStream(rig, t) } : {}),
      };
    };
    const liveStream = (r: StreamRig, t: number): LiveStream => {
      const bps = recentStreamRates(r.records, ids.length, t);
      const stats = r.stats();
      const paused = stats.reduce((a, g) => a + g.paused, 0);
      if (paused > streamPausedMax) streamPausedMax = paused;
      return {
        key: `${r.tenant}/${r.resource}`,
        refillPerSecond: r.limit.refillPerSecond,
        multiple: r.multiple,
        active: streamStart !== undefined && t <= streamStart.endMs,
        regions: stats.map((g, i) => ({
          id: g.id,
          bytesPerSec: bps[i] ?? 0,
          paused: g.paused,
          connections: g.connections,
          clientBufferedBytes: g.clientBufferedBytes,
          sharePpm: streamPoller?.latest?.regions[g.id]?.sharePpm ?? null,
        })),
      };
    };
    if (o.tty) write("\x1b[?25l");
    viewTimer = setInterval(
      () => write(o.tty ? ttyFrame(liveState()) : renderLine(liveState())),
      o.tty ? 500 : 1000,
    );
    traffic.start();
    await runSchedule(
      run.plan,
      run.clock,
      {
        onScenario(s, atMs) {
          current = s;
          const demand: Demand = [
            s.demand,
            ...SIDE_KEYS.map((k) => Object.fromEntries(ids.map((id) => [id, k.ratePerRegion]))),
          ];
          traffic?.setDemand(demand);
          if (s.name === "stream" && rig) {
            streamStart = { atMs, endMs: s.endMs };
            rig.startClients(Math.max(0, s.endMs - atMs));
          }
          if (!o.tty)
            write(`[${(atMs / 1000).toFixed(0).padStart(3)}s] scenario ${s.name}: ${s.description}\n`);
        },
        async onEvent(e, _s, atMs) {
          if (e.kind === "cut") {
            await cluster.setGossipLinks(e.region, false);
            faults.push({
              kind: "partition",
              label: `${e.region} partitioned`,
              startMs: atMs,
              endMs: Number.POSITIVE_INFINITY,
            });
          } else if (e.kind === "heal") {
            await cluster.setGossipLinks(e.region, true);
            const f = faults.find((x) => x.kind === "partition" && x.endMs === Number.POSITIVE_INFINITY);
            if (f) f.endMs = now();
          } else {
            await flushRegion(cluster, e.region);
            const window: FaultWindow = {
              kind: "state-loss",
              label: `${e.region} FLUSHALL → recovery`,
              startMs: atMs,
              endMs: Number.POSITIVE_INFINITY,
            };
            faults.push(window);
            flushes.push({ region: e.region, atMs, window });
          }
          if (!o.tty) write(`[${(atMs / 1000).toFixed(0).padStart(3)}s] fault: ${e.kind} ${e.region}\n`);
        },
      },
      o.signal,
    );
    if (o.signal?.aborted) interrupted = true;
  } catch (err) {
    if (!(err instanceof Interrupted)) throw err;
    interrupted = true;
  } finally {
    if (viewTimer) clearInterval(viewTimer);
    await traffic?.stop();
    await poller?.stop();
    await streamPoller?.stop();
    await closeSender?.();
    if (o.tty) write("\x1b[?25h\n");
    if (rig) {
      write("stopping the stream clients and servers…\n");
      await rig.stop();
    }
    write("stopping the cluster…\n");
    await cluster.stop();
  }
  return {
    interrupted,
    faults,
    flushes,
    samples: poller?.samples ?? [],
    counters: { sent: traffic?.counters.sent ?? 0, shed: traffic?.counters.shed ?? 0 },
    rig,
    streamStart,
    streamPausedMax,
  };
}

/** The verdicts and the summary lines, written as they are made. */
interface Judgement {
  readonly summary: readonly string[];
  readonly mainVerdict: OracleVerdict;
  readonly streamVerdict: OracleVerdict | undefined;
  /** Requests that got no usable answer. */
  readonly errors: number;
  readonly ok: boolean;
}

/** Judges from the client's own records, after every answer is in. */
function judge(o: DemoOptions, run: DemoRun, t: TrafficOutcome): Judgement {
  const { ids, keys, main, log } = run;
  const { interrupted, rig, streamStart } = t;
  const summary: string[] = [];
  if (interrupted) summary.push("interrupted: the verdict covers the part of the run that happened");
  const verdicts = keys.map((k, i) => checkGlobalBound(log.admissions(i), k));
  const mainVerdict = verdicts[0]!;
  summary.push(...boundLines(mainVerdict, 0));
  for (const [i, v] of verdicts.entries()) {
    if (i === 0) continue;
    const k = keys[i]!;
    summary.push(...boundLines(v, 0, `  ${k.tenant}/${k.resource}`));
  }
  const shift = run.plan.find((s) => s.name === "shift");
  if (shift && !interrupted) {
    const len = shift.endMs - shift.startMs;
    // Measure the second half (at most the last 10 s excluded from the start):
    // by then the burst the hot region held before the shift is spent, so the
    // figure is the sustained rate, not C/T; the share line shows the reaction time.
    const u = utilization(
      log,
      0,
      main.refillPerSecond,
      shift.startMs,
      shift.endMs,
      Math.min(10_000, len / 2),
    );
    const reached = shareReachedAfter(t.samples, run.hot, shift.startMs, shift.endMs);
    summary.push(utilizationLine(u, run.hot, main.refillPerSecond, reached));
  }
  let streamVerdict: OracleVerdict | undefined;
  if (rig) {
    const adm = rig.records.map((f) => ({ sentMs: f.sentMs, answeredMs: f.answeredMs, cost: f.bytes }));
    streamVerdict = checkGlobalBound(adm, rig.limit);
    summary.push(...streamBoundLines(streamVerdict, 0));
    if (streamStart && !interrupted) {
      const len = streamStart.endMs - streamStart.atMs;
      // Skip the first seconds: the burst C is spent then, and the figure is the sustained rate.
      const sr = streamRate(
        rig.records,
        ids.length,
        rig.limit.refillPerSecond,
        streamStart.atMs,
        streamStart.endMs,
        Math.min(2000, len / 4),
      );
      summary.push(streamRateLine(sr, ids, rig.limit.refillPerSecond, rig.multiple));
    } else if (!streamStart && !interrupted) summary.push("stream: the clients never started");
    for (const e of rig.errors) summary.push(`stream client error: ${e}`);
  }
  let errors = 0;
  for (const r of log.records()) if (r.outcome === OUTCOME.error) errors++;
  if (errors > 0)
    summary.push(
      `${errors} requests got no usable answer (timeouts or errors); the oracle cannot count them`,
    );
  const ok = verdicts.every((v) => v.ok) && (streamVerdict?.ok ?? true);
  for (const line of summary) o.write(`${line}\n`);
  return { summary, mainVerdict, streamVerdict, errors, ok };
}

/** Closes the fault windows (a state loss ends when recovery was measured to end) and writes the report. */
async function writeDemoReport(
  o: DemoOptions,
  run: DemoRun,
  t: TrafficOutcome,
  j: Judgement,
  endMs: number,
): Promise<DemoResult> {
  const { ids, keys, main, log } = run;
  const { rig, faults } = t;
  const { summary, ok, mainVerdict, streamVerdict } = j;
  for (const f of t.flushes) f.window.endMs = recoveryEnd(t.samples, f.region, f.atMs, f.atMs + 3500);
  for (const f of faults) if (f.endMs === Number.POSITIVE_INFINITY) f.endMs = endMs;
  const data = buildReportData({
    ids,
    main,
    plan: run.plan,
    faults,
    samples: t.samples,
    log,
    endMs,
    durationMs: Math.max(o.durationMs, endMs),
    summary,
    ok,
    ...(rig
      ? {
          stream: {
            tenant: rig.tenant,
            resource: rig.resource,
            capacity: rig.limit.capacity,
            refillPerSecond: rig.limit.refillPerSecond,
            multiple: rig.multiple,
            bucketMs: 1000,
            ...withTimes(streamRateSeries(rig.records, ids.length, 0, endMs, 1000), 1000),
          },
        }
      : {}),
    stats: {
      "requests sent": t.counters.sent,
      "requests recorded": log.size,
      "shed at the in-flight cap": t.counters.shed,
      "no usable answer": j.errors,
      "admitted (main key)": mainVerdict.admitted,
      "sub-intervals checked (main key)": mainVerdict.intervalsChecked,
      ...(rig
        ? {
            "stream bytes sent by the clients": rig.stats().reduce((a, g) => a + g.clientSentBytes, 0),
            "stream bytes admitted": streamVerdict?.admitted ?? 0,
            "stream frames admitted": rig.records.length,
            "most stream connections paused at once (sampled)": t.streamPausedMax,
            "sub-intervals checked (stream)": streamVerdict?.intervalsChecked ?? 0,
          }
        : {}),
    },
  });
  const files = await writeReport(o.reportPath, data, log, keys, ids, rig?.records);
  o.write(`report: ${files.htmlPath}\nseries: ${files.jsonPath}\n`);
  return {
    exitCode: !ok ? 1 : t.interrupted ? 130 : 0,
    ok,
    verdict: mainVerdict,
    ...(streamVerdict ? { streamVerdict } : {}),
    summary,
    reportPath: files.htmlPath,
    jsonPath: files.jsonPath,
  };
}

class Interrupted extends Error {}

/** Bucket start times for a [region][bucket] series that starts at 0. */
function withTimes(rows: number[][], bucketMs: number): { tMs: number[]; bytesPerSec: number[][] } {
  return { tMs: (rows[0] ?? []).map((_, j) => j * bucketMs), bytesPerSec: rows };
}

function buildReportData(a: {
  ids: readonly string[];
  main: DemoKey;
  plan: readonly PlannedScenario[];
  faults: readonly FaultWindow[];
  samples: readonly ClusterSample[];
  log: RequestLog;
  endMs: number;
  durationMs: number;
  summary: readonly string[];
  ok: boolean;
  stream?: ReportData["stream"];
  stats: Record<string, number>;
}): ReportData {
  const rates = rateSeries(a.log, 0, a.ids.length, 0, a.endMs, 1000);
  const linkNames = Object.keys(a.samples[0]?.links ?? {});
  return {
    title: "geoquota demo",
    generatedAt: new Date().toISOString(),
    durationMs: a.durationMs,
    key: a.main,
    regions: a.ids,
    scenarios: a.plan.map((s) => ({ name: s.name, startMs: s.startMs, endMs: s.endMs })),
    faults: a.faults,
    shares: {
      tMs: a.samples.map((s) => s.tMs),
      perRegion: a.ids.map((id) => a.samples.map((s) => s.regions[id]?.sharePpm ?? null)),
    },
    rates: {
      bucketMs: rates.bucketMs,
      tMs: rates.admittedPerSec[0]?.map((_, j) => rates.startMs + j * rates.bucketMs) ?? [],
      admittedPerSec: rates.admittedPerSec,
      deniedPerSec: rates.deniedPerSec,
    },
    cumulative: cumulativeSeries(a.log, 0, a.main),
    lag: {
      tMs: a.samples.map((s) => s.tMs),
      perLink: Object.fromEntries(
        linkNames.map((l) => [
          l,
          a.samples.map((s) => (s.links[l]?.up ? (s.links[l]?.lagMs ?? null) : null)),
        ]),
      ),
    },
    summary: a.summary,
    ok: a.ok,
    ...(a.stream ? { stream: a.stream } : {}),
    stats: a.stats,
  };
}
