// Section 11: Envoy's rate limit quota service (RLQS, DESIGN §11, issue 28 point 6), three
// figures in one run, the region config's `rls.rlqs` defaults throughout (printed with them):
//
// 1. A decision through the proxy's local bucket (an assignment enforced in-process as a token
//    bucket, rlqs-proxy.ts, its stream open, reporting every 500 ms and receiving renewals)
//    beside section 7's RLS round trip (ShouldRateLimit from grpc-runner.mjs in a child
//    process) on the same region (startRegionService + startRegionRls, one redis-server): the
//    local loop flat out (section 3's timed loop, one clock read per decision), the RLS at 1k/s
//    and flat out; ratios local ÷ RLS.
// 2. Assignment messages per second per proxy at a steady demand within the limit (two
//    .bin/rlqs-client proxies reporting every 500 ms), counted over a window after a warm-up:
//    beside 1/(TTL − renewBefore), what renewals alone would send.
// 3. A hot region through RLQS: a 3-region cluster (the CLI's, `rls` on), two .bin/rlqs-client
//    proxies in one region only demanding 1.5·r of one key; admitted over the last seconds ÷ r.
//
// Nothing is asserted (the machine is shared); the rows carry issue 28's targets.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RedisServer } from "@geoquota/procs";
import { type InProcessFigures, loop, type Run, summary } from "./leased-path.js";
import { type RlqsClientLine, InProcessRlqsProxy, runRlqsClient } from "./rlqs-proxy.js";
import { grpcLoad, startRlsRegion } from "./rls-path.js";
import { fmt } from "./table.js";
import type { Budget, Row } from "./types.js";

/** The proxies' reporting interval (Envoy's floor is 100 ms). */
export const RLQS_REPORT_MS = 500;
/** Part 2's key (one region: its whole limit is the region's) and each proxy's steady demand. */
export const STEADY_LIMIT = { capacity: 200, refillPerSecond: 200 } as const;
const STEADY_TENANT = "rlqs_steady";
const STEADY_PROXIES = 2;
const STEADY_RATE = 50;
/** Part 3's key on the 3-region cluster, and its demand (× r, split over HOT_PROXIES). */
export const HOT_LIMIT = { capacity: 100, refillPerSecond: 100 } as const;
const HOT_TENANT = "rlqs_hot";
const HOT_PROXIES = 2;
const HOT_DEMAND_FACTOR = 1.5;
const RLS_RATE = 1000;

export interface RlqsSettings {
  readonly assignmentTtlMs: number;
  readonly renewBeforeMs: number;
  readonly deliveryMarginMs: number;
  readonly assignmentFraction: number;
  readonly reportMs: number;
}

export interface RlqsLocalFigures extends InProcessFigures {
  /** Part of the local decisions that were admissions (the rest: the bucket was empty). */
  readonly admittedFraction: number;
  /** Assignments the proxy received during the measured run (renewals, pushes). */
  readonly assignmentsDuringRun: number;
}

export interface RlqsRlsRun {
  /** Asked rate, req/s; 0 = flat out. */
  readonly rate: number;
  readonly decisionsPerSecond: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
  readonly errors: number;
  readonly denied: number;
  readonly shed: number;
}

export interface RlqsSteadyProxy {
  /** Assignments received in the window. */
  readonly assignments: number;
  readonly perSecond: number;
  /** Over the whole run (the first one included). */
  readonly received: number;
  /** Of the assignments in the window. */
  readonly meanTtlMs: number;
  /** Local decisions in the window: admitted and denied. */
  readonly allowed: number;
  readonly denied: number;
}

export interface RlqsSteady {
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  readonly demandPerProxy: number;
  readonly warmupMs: number;
  readonly windowMs: number;
  readonly proxies: RlqsSteadyProxy[];
  /** Mean over the proxies, per second. */
  readonly assignmentsPerSecond: number;
  /** 1 / (TTL − renewBefore): renewals alone. */
  readonly renewalsPerSecond: number;
  readonly errors: number;
}

export interface RlqsHot {
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  readonly regions: number;
  readonly proxies: number;
  readonly demandPerSecond: number;
  readonly runMs: number;
  /** The measured window: the last windowMs of the run. */
  readonly windowMs: number;
  readonly admittedPerSecond: number;
  /** admitted ÷ r over the window (issue 28: ≥ 0.9). */
  readonly utilization: number;
  /** Admitted in each second of the run, all proxies. */
  readonly admittedEachSecond: number[];
  /** Mean per proxy over the window (over-demand: pushes on denial beside renewals). */
  readonly assignmentsPerSecondPerProxy: number;
  /** The proxies' denials over the whole run by reason (token_bucket: empty; expired; DENY_ALL; no_assignment). */
  readonly deniedBy: Record<string, number>;
  readonly errors: number;
}

export interface RlqsPathResult {
  readonly settings: RlqsSettings;
  readonly durationS: number;
  readonly local: RlqsLocalFigures;
  readonly rls: RlqsRlsRun[];
  /** local ÷ RLS flat out. */
  readonly vsMax: { readonly decisionsPerSecond: number; readonly p50: number; readonly p99: number };
  /** local ÷ RLS at 1k/s (an unloaded round trip). */
  readonly vs1k: { readonly p50: number; readonly p99: number };
  readonly steady: RlqsSteady;
  readonly hot: RlqsHot;
}

/** The CLI's local cluster (injected), as this section needs it: each region's RLS address. */
export interface RlqsCluster {
  readonly regions: readonly { readonly id: string; readonly rls?: string }[];
  stop(): Promise<void>;
}

export type StartRlqsCluster = (o: {
  regions: number;
  policiesFile: string;
  configOverrides: Record<string, unknown>;
  rls: true;
}) => Promise<RlqsCluster>;

const safeRatio = (a: number, b: number) => (b > 0 ? a / b : 0);
const policy = (tenant: string, l: { capacity: number; refillPerSecond: number }) => ({
  tenant,
  resource: "api",
  algorithm: "token_bucket",
  ...l,
});

/** Part 1: the local bucket flat out, then the RLS at 1k/s and flat out, on `address`. */
async function localBesideRls(address: string, budget: Budget) {
  const durationS = Math.max(1, Math.round(budget.runMs / 1000));
  const proxy = new InProcessRlqsProxy(
    address,
    "geoquota",
    { tenant: "rlqs_local", resource: "api" },
    RLQS_REPORT_MS,
  );
  const sync = () => {
    proxy.decide();
    return true;
  };
  const never = async () => {};
  try {
    await proxy.ready();
    if (!budget.smoke) {
      // Warm-up of both (JIT, the channel, the assignment sized from a reported demand).
      await loop(1000, sync, never);
      await grpcLoad(address, RLS_RATE, 1);
    }
    const before = { allowed: proxy.allowed, denied: proxy.denied, n: proxy.assignmentsAtMs.length };
    const run: Run = await loop(durationS * 1000, sync, never);
    const allowed = proxy.allowed - before.allowed;
    const decided = allowed + proxy.denied - before.denied;
    const local: RlqsLocalFigures = {
      ...summary([run]),
      admittedFraction: safeRatio(allowed, decided),
      assignmentsDuringRun: proxy.assignmentsAtMs.length - before.n,
    };
    const rls: RlqsRlsRun[] = [];
    for (const rate of [RLS_RATE, 0]) {
      const g = await grpcLoad(address, rate, durationS);
      rls.push({
        rate,
        decisionsPerSecond: (g.ok + g.overLimit) / g.elapsedS,
        p50Us: g.latenciesMs.p50 * 1000,
        p99Us: g.latenciesMs.p99 * 1000,
        p999Us: g.latenciesMs.p999 * 1000,
        errors: g.errors,
        denied: g.overLimit,
        shed: g.shed,
      });
    }
    return { durationS, local, rls };
  } finally {
    await proxy.close();
  }
}

const assignmentsOf = (lines: readonly RlqsClientLine[], from: number, to: number) =>
  lines.filter(
    (l) => l.assignment !== undefined && l.assignment.kind !== "abandon" && l.t_ms >= from && l.t_ms < to,
  );
const decisionsOf = (lines: readonly RlqsClientLine[], from: number, to: number, allowed: boolean) =>
  lines.filter((l) => l.allowed === allowed && l.t_ms >= from && l.t_ms < to).length;
function deniedBy(lines: readonly RlqsClientLine[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of lines) if (l.allowed === false) out[l.reason ?? "?"] = (out[l.reason ?? "?"] ?? 0) + 1;
  return out;
}
const errorsOf = (per: readonly RlqsClientLine[][]) => per.flat().filter((l) => l.err !== undefined).length;

/** .bin/rlqs-client proxies of one bucket on `addr`, started together (one epoch). */
function proxies(addr: string, tenant: string, n: number, rate: number, forMs: number) {
  const epoch = Date.now();
  return Promise.all(
    Array.from({ length: n }, (_, k) =>
      runRlqsClient({
        addr,
        bucket: `tenant=${tenant},resource=api`,
        rate,
        forMs,
        reportMs: RLQS_REPORT_MS,
        epoch,
        id: `${tenant}.${k}`,
      }),
    ),
  );
}

/** Part 2: assignment messages per proxy at a steady demand within the limit. */
async function steadyAssignments(addr: string, settings: RlqsSettings, budget: Budget): Promise<RlqsSteady> {
  const warmupMs = budget.smoke ? 500 : 3000;
  const windowMs = budget.smoke ? 1500 : 9000;
  const per = await proxies(addr, STEADY_TENANT, STEADY_PROXIES, STEADY_RATE, warmupMs + windowMs);
  const to = warmupMs + windowMs;
  const rows = per.map((lines): RlqsSteadyProxy => {
    const got = assignmentsOf(lines, warmupMs, to);
    const all = assignmentsOf(lines, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
    return {
      assignments: got.length,
      perSecond: got.length / (windowMs / 1000),
      received: all.length,
      meanTtlMs: got.reduce((s, l) => s + (l.assignment?.ttl_ms ?? 0), 0) / Math.max(1, got.length),
      allowed: decisionsOf(lines, warmupMs, to, true),
      denied: decisionsOf(lines, warmupMs, to, false),
    };
  });
  return {
    limit: STEADY_LIMIT,
    demandPerProxy: STEADY_RATE,
    warmupMs,
    windowMs,
    proxies: rows,
    assignmentsPerSecond: rows.reduce((s, r) => s + r.perSecond, 0) / Math.max(1, rows.length),
    renewalsPerSecond: 1000 / (settings.assignmentTtlMs - settings.renewBeforeMs),
    errors: errorsOf(per),
  };
}

/** Part 3: a 3-region cluster, proxies in its first region only, demanding 1.5·r. */
async function hotRegion(startCluster: StartRlqsCluster, budget: Budget): Promise<RlqsHot> {
  const runMs = budget.smoke ? 3000 : 12_000;
  const windowMs = budget.smoke ? 1000 : 4000;
  const dir = mkdtempSync(join(tmpdir(), "geoquota-bench-rlqs-"));
  const policiesFile = join(dir, "policies-rlqs.json");
  writeFileSync(
    policiesFile,
    JSON.stringify({
      default: { algorithm: "token_bucket", capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
      policies: [policy(HOT_TENANT, HOT_LIMIT)],
    }),
  );
  const demand = HOT_DEMAND_FACTOR * HOT_LIMIT.refillPerSecond;
  try {
    const cluster = await startCluster({
      regions: 3,
      policiesFile,
      rls: true,
      // The region config's rls.rlqs defaults, as in part 1's region.
      configOverrides: { rls: { algorithm: "token_bucket", rlqs: {} } },
    });
    try {
      const addr = cluster.regions[0]?.rls;
      if (addr === undefined) throw new Error("bench rlqs: the cluster's first region has no RLS address");
      const per = await proxies(addr, HOT_TENANT, HOT_PROXIES, demand / HOT_PROXIES, runMs);
      const all = per.flat();
      const from = runMs - windowMs;
      const admitted = decisionsOf(all, from, runMs, true);
      const admittedPerSecond = admitted / (windowMs / 1000);
      return {
        limit: HOT_LIMIT,
        regions: cluster.regions.length,
        proxies: HOT_PROXIES,
        demandPerSecond: demand,
        runMs,
        windowMs,
        admittedPerSecond,
        utilization: admittedPerSecond / HOT_LIMIT.refillPerSecond,
        admittedEachSecond: Array.from({ length: Math.ceil(runMs / 1000) }, (_, s) =>
          decisionsOf(all, s * 1000, (s + 1) * 1000, true),
        ),
        assignmentsPerSecondPerProxy:
          per.reduce((s, lines) => s + assignmentsOf(lines, from, runMs).length, 0) /
          HOT_PROXIES /
          (windowMs / 1000),
        deniedBy: deniedBy(all),
        errors: errorsOf(per),
      };
    } finally {
      await cluster.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchRlqsPath(
  server: RedisServer,
  startCluster: StartRlqsCluster,
  budget: Budget,
): Promise<RlqsPathResult> {
  const region = await startRlsRegion(server, {
    rls: { algorithm: "token_bucket", rlqs: {} },
    policies: [policy(STEADY_TENANT, STEADY_LIMIT)],
  });
  let part1: Awaited<ReturnType<typeof localBesideRls>>;
  let steady: RlqsSteady;
  let settings: RlqsSettings;
  try {
    const q = region.config.rls?.rlqs;
    if (q === undefined) throw new Error("bench rlqs: the region config has no rls.rlqs");
    settings = {
      assignmentTtlMs: q.assignmentTtlMs,
      renewBeforeMs: q.renewBeforeMs,
      deliveryMarginMs: q.deliveryMarginMs,
      assignmentFraction: q.assignmentFraction,
      reportMs: RLQS_REPORT_MS,
    };
    const address = region.rls.server.address;
    part1 = await localBesideRls(address, budget);
    steady = await steadyAssignments(address, settings, budget);
  } finally {
    await region.close();
  }
  const hot = await hotRegion(startCluster, budget);
  const { local, rls } = part1;
  const at = (rate: number) => rls.find((r) => r.rate === rate);
  const max = at(0);
  const slow = at(RLS_RATE);
  return {
    settings,
    durationS: part1.durationS,
    local,
    rls,
    vsMax: {
      decisionsPerSecond: safeRatio(local.decisionsPerSecond, max?.decisionsPerSecond ?? 0),
      p50: safeRatio(local.p50Us, max?.p50Us ?? 0),
      p99: safeRatio(local.p99Us, max?.p99Us ?? 0),
    },
    vs1k: {
      p50: safeRatio(local.p50Us, slow?.p50Us ?? 0),
      p99: safeRatio(local.p99Us, slow?.p99Us ?? 0),
    },
    steady,
    hot,
  };
}

/** A ratio that may be far from 1: 7,483× or 1/232,000 rather than 0.00×. */
function farRatio(x: number): string {
  if (!(x > 0)) return "—";
  if (x >= 100) return `${fmt.int(x)}×`;
  return x >= 0.01 ? fmt.ratio(x) : `1/${fmt.int(1 / x)}`;
}

export function rlqsRows(r: RlqsPathResult): Row[] {
  const s = "11 rlqs local bucket beside rls";
  const q = r.settings;
  const l = r.local;
  const rows: Row[] = [
    {
      section: s,
      metric: "local bucket (in-process, stream open): decisions/s, p50 / p99 / p999",
      value:
        `${fmt.int(l.decisionsPerSecond)}, ${fmt.us(l.p50Us)} / ${fmt.us(l.p99Us)} / ${fmt.us(l.p999Us)}` +
        ` (${fmt.num(100 * l.admittedFraction)}% admitted, ${l.assignmentsDuringRun} assignments received)`,
      target: "",
    },
  ];
  for (const x of r.rls) {
    const bad = x.errors + x.denied + x.shed;
    rows.push({
      section: s,
      metric: `rls ShouldRateLimit @ ${x.rate === 0 ? "max" : `${x.rate / 1000}k/s`}: decisions/s, p50 / p99 / p999`,
      value:
        `${fmt.int(x.decisionsPerSecond)}, ${fmt.us(x.p50Us)} / ${fmt.us(x.p99Us)} / ${fmt.us(x.p999Us)}` +
        (bad > 0 ? ` (${x.errors} errors, ${x.denied} denied, ${x.shed} shed)` : ""),
      target: "",
    });
  }
  rows.push(
    {
      section: s,
      metric: "local ÷ rls @ max: decisions/s, p50, p99",
      value: `${farRatio(r.vsMax.decisionsPerSecond)}, ${farRatio(r.vsMax.p50)}, ${farRatio(r.vsMax.p99)}`,
      target: "",
    },
    {
      section: s,
      metric: "local ÷ rls @ 1k/s: p50, p99",
      value: `${farRatio(r.vs1k.p50)}, ${farRatio(r.vs1k.p99)}`,
      target: "",
    },
    {
      section: s,
      metric:
        `assignments/s per proxy, ${r.steady.proxies.length} × ${r.steady.demandPerProxy}/s of r = ${r.steady.limit.refillPerSecond}/s, ` +
        `report ${q.reportMs} ms (1/(TTL ${q.assignmentTtlMs} − renewBefore ${q.renewBeforeMs} ms))`,
      value:
        `${fmt.num(r.steady.assignmentsPerSecond, 2)} (${fmt.num(r.steady.renewalsPerSecond, 2)}); ` +
        `mean TTL ${fmt.int(r.steady.proxies.reduce((a, p) => a + p.meanTtlMs, 0) / Math.max(1, r.steady.proxies.length))} ms, ` +
        `${r.steady.proxies.reduce((a, p) => a + p.denied, 0)} denied in the window` +
        (r.steady.errors > 0 ? ` (${r.steady.errors} client errors)` : ""),
      target: "",
    },
    {
      section: s,
      metric:
        `hot region, ${r.hot.proxies} proxies in 1 of ${r.hot.regions} demanding ${fmt.num(r.hot.demandPerSecond / r.hot.limit.refillPerSecond)}·r: ` +
        `admitted ÷ r, last ${fmt.num(r.hot.windowMs / 1000)} s`,
      value:
        `${fmt.num(r.hot.utilization, 3)}; admitted each second: ${r.hot.admittedEachSecond.join(" ")}` +
        (r.hot.errors > 0 ? ` (${r.hot.errors} client errors)` : ""),
      target: "≥ 0.90",
      met: r.hot.utilization >= 0.9,
    },
    {
      section: s,
      metric: "hot region: assignments/s per proxy (renewals and pushes on denial); denials by reason",
      value: `${fmt.num(r.hot.assignmentsPerSecondPerProxy, 2)}; ${
        Object.entries(r.hot.deniedBy)
          .map(([k, n]) => `${k} ${n}`)
          .join(", ") || "none"
      }`,
      target: "",
    },
  );
  return rows;
}
