// Section 12 (issue 24 points 1 and 2, "measure first, deterministically"): what one decision
// costs Redis in instructions, not in time. A redis-server runs under `valgrind
// --tool=callgrind`; for each variant the counters are zeroed (`callgrind_control -z`), a fixed
// number of decisions is run at 64 in flight, and the dump (`callgrind_control -d`) gives the
// instructions the server executed meanwhile (Ir: its whole process, socket reads, parsing,
// scripts and replies). Instruction counts do not move with the machine's load, so they steer
// the work on check.lua where decisions/s ratios on a shared 2-core box cannot; section 1
// confirms with rates. The idle server's own instructions (serverCron) over the same wall time
// are measured once and subtracted.
//
// The policies are chosen so the steady state is measured: every bucket is created and every
// key visited once before counting (warm-up), and the TTL (C/r + D + 3ε + 1 s, C/r = 1,000 s
// here) is far beyond the run, so keep()'s bookkeeping (PEXPIRE/SADD once per TTL per key) is
// not in the counts; `innerCommandsPerDecision` (INFO commandstats) says what ran.
import { execFile } from "node:child_process";
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { findBinary, type RedisServer, startRedis } from "@geoquota/procs";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { bindCeiling } from "./ceiling.js";
import { runClosedLoop } from "./closed-loop.js";
import { BENCH_REGION, benchPolicy, TIMING } from "./policies.js";
import { commandStats, statsBetween } from "./redis-stats.js";
import type { Budget } from "./types.js";

const run = promisify(execFile);

const IN_FLIGHT = 64;
const COST_KEYS = 200;
const BATCH_CHECKS = 64;

export const COST_VARIANTS = ["ceiling", "checkAllowed", "checkDenied", "checkBatched", "rlf"] as const;
export type CostVariant = (typeof COST_VARIANTS)[number];

export interface CostFigures {
  readonly decisions: number;
  /** Redis instructions per decision (callgrind Ir, the idle server's subtracted). */
  readonly instructionsPerDecision: number;
  /** Script calls (EVALSHA/EVAL) per decision. */
  readonly scriptCallsPerDecision: number;
  /** Commands run inside the scripts per decision. */
  readonly innerCommandsPerDecision: number;
}

export interface RedisCostResult {
  /** Empty when measured; else why not (valgrind missing, …): the section never fails the bench. */
  readonly skipped: string;
  readonly decisionsPerVariant: number;
  readonly keys: number;
  /** Idle server's instructions per second (subtracted from every variant). */
  readonly idleInstructionsPerSecond: number;
  readonly variants: Partial<Record<CostVariant, CostFigures>>;
  /** checkAllowed ÷ ceiling, checkBatched ÷ ceiling, checkAllowed ÷ rlf (instructions per decision). */
  readonly allowedVsCeiling: number;
  readonly batchedVsCeiling: number;
  readonly allowedVsRlf: number;
  /** Where the dumps were kept (GQ_BENCH_CALLGRIND_DIR), for callgrind_annotate; empty: removed. */
  readonly dumpDir: string;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The instructions of the newest dump of `pid` in `dir` (its `totals:` line). */
function lastDumpTotal(dir: string, pid: number): number {
  const prefix = `cg.${pid}.out.`;
  const dumps = readdirSync(dir)
    .filter((f) => f.startsWith(prefix))
    .map((f) => Number(f.slice(prefix.length)))
    .filter((n) => Number.isInteger(n))
    .sort((a, b) => a - b);
  const last = dumps.at(-1);
  if (last === undefined) throw new Error(`callgrind wrote no dump for pid ${pid} in ${dir}`);
  const text = readFileSync(join(dir, `${prefix}${last}`), "utf8");
  const m = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
  if (!m) throw new Error(`callgrind dump ${prefix}${last}: no totals line`);
  return Number(m[1]);
}

export async function benchRedisCost(budget: Budget): Promise<RedisCostResult> {
  const none = (skipped: string): RedisCostResult => ({
    skipped,
    decisionsPerVariant: 0,
    keys: COST_KEYS,
    idleInstructionsPerSecond: 0,
    variants: {},
    allowedVsCeiling: 0,
    batchedVsCeiling: 0,
    allowedVsRlf: 0,
    dumpDir: "",
  });
  const valgrind = onPath("valgrind");
  const control = onPath("callgrind_control");
  if (!valgrind || !control)
    return none("valgrind (callgrind_control) not on PATH: apt-get install valgrind");
  const keep = process.env.GQ_BENCH_CALLGRIND_DIR;
  const dir = keep ?? mkdtempSync(join(tmpdir(), "gq-callgrind-"));
  mkdirSync(dir, { recursive: true });
  // The server runs as `valgrind … redis-server <args>` through a wrapper (startRedis takes one
  // binary); exec keeps the pid, so callgrind_control finds it by the server's own pid.
  const wrapper = join(dir, "redis-server-callgrind.sh");
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexec ${valgrind} --tool=callgrind --callgrind-out-file=${dir}/cg.%p.out ${findBinary("redis-server")} "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  let server: RedisServer | undefined;
  try {
    server = await startRedis({ binary: wrapper });
    const pid = server.process.pid;
    const zero = () => run(control, ["-z", String(pid)]);
    const dump = async () => {
      await run(control, ["-d", String(pid)]);
      return lastDumpTotal(dir, pid);
    };
    const stats = server.client();
    const conns = {
      ceiling: server.client(),
      checkAllowed: server.client(),
      checkDenied: server.client(),
      checkBatched: server.client(),
      rlf: server.client(),
    };
    await initFreshRegion(conns.checkAllowed);
    const ceiling = bindCeiling(conns.ceiling);
    const store = createRedisStore({ redis: conns.checkAllowed, region: BENCH_REGION, timing: TIMING });
    const denyStore = createRedisStore({ redis: conns.checkDenied, region: BENCH_REGION, timing: TIMING });
    const batchStore = createRedisStore({
      redis: conns.checkBatched,
      region: BENCH_REGION,
      timing: TIMING,
      batch: { maxChecks: BATCH_CHECKS, maxWaitUs: 1000 },
    });
    const rlf = new RateLimiterRedis({
      storeClient: conns.rlf,
      keyPrefix: "rlf",
      points: 1e9,
      duration: 1000,
    });
    // C/r = 1,000 s: the TTL outlives the run (no bookkeeping due); the denying keys hold one token
    // that the warm-up spends, and refill one per 1,000 s.
    const keys = (from: number, capacity: number, refill: number) =>
      Array.from({ length: COST_KEYS }, (_, i) => benchPolicy(from + i, capacity, refill));
    const allowed = keys(0, 1e9, 1e6);
    const denied = keys(COST_KEYS, 1, 1e-3);
    const batched = keys(2 * COST_KEYS, 1e9, 1e6);
    const ops: Record<CostVariant, (i: number) => Promise<unknown>> = {
      ceiling: (i) => ceiling(`ceil:{t${i % COST_KEYS}}`, 1e9, 1e6),
      checkAllowed: (i) => store.check(allowed[i % COST_KEYS]!, 1),
      checkDenied: (i) => denyStore.check(denied[i % COST_KEYS]!, 1),
      checkBatched: (i) => batchStore.check(batched[i % COST_KEYS]!, 1),
      rlf: (i) => rlf.consume(`t${i % COST_KEYS}`, 1),
    };
    for (const v of COST_VARIANTS) {
      await runClosedLoop({ inFlight: IN_FLIGHT, durationMs: 600_000, maxOps: 2 * COST_KEYS, op: ops[v] });
    }
    // The idle server (cron, no clients' commands) over a second.
    await zero();
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, budget.smoke ? 300 : 1000));
    const idleIr = await dump();
    const idlePerSecond = idleIr / ((performance.now() - t0) / 1000);
    const n = budget.smoke ? 128 : 2048;
    const variants: Partial<Record<CostVariant, CostFigures>> = {};
    for (const v of COST_VARIANTS) {
      const before = await commandStats(stats);
      await zero();
      const t = performance.now();
      const loop = await runClosedLoop({ inFlight: IN_FLIGHT, durationMs: 600_000, maxOps: n, op: ops[v] });
      const ir = await dump();
      const seconds = (performance.now() - t) / 1000;
      const d = statsBetween(before, await commandStats(stats));
      // INFO commandstats itself (one call before, one after) is outside the zeroed window.
      variants[v] = {
        decisions: loop.ops,
        instructionsPerDecision: Math.max(0, ir - idlePerSecond * seconds) / loop.ops,
        scriptCallsPerDecision: d.scriptCalls / loop.ops,
        innerCommandsPerDecision: d.otherCalls / loop.ops,
      };
    }
    await store.close();
    await denyStore.close();
    await batchStore.close();
    const per = (v: CostVariant) => variants[v]?.instructionsPerDecision ?? 0;
    const ratio = (a: number, b: number) => (b > 0 ? a / b : 0);
    return {
      skipped: "",
      decisionsPerVariant: n,
      keys: COST_KEYS,
      idleInstructionsPerSecond: idlePerSecond,
      variants,
      allowedVsCeiling: ratio(per("checkAllowed"), per("ceiling")),
      batchedVsCeiling: ratio(per("checkBatched"), per("ceiling")),
      allowedVsRlf: ratio(per("checkAllowed"), per("rlf")),
      dumpDir: keep ?? "",
    };
  } finally {
    await server?.stop();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}
