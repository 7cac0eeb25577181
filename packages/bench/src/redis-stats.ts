// Redis-side counts from INFO commandstats. Commands a script runs through
// redis.call() are counted too, under their own names, so "round-trips" are
// the script calls (EVALSHA/EVAL) plus the other top-level commands a path
// sends, and `inner` is everything else.
import type { Redis } from "ioredis";

export interface CommandStat {
  readonly calls: number;
  readonly usec: number;
}

export type CommandStats = Map<string, CommandStat>;

const SCRIPT_CALLS = new Set(["evalsha", "eval", "evalsha_ro", "eval_ro"]);

export async function commandStats(redis: Redis): Promise<CommandStats> {
  const text = await redis.info("commandstats");
  const out: CommandStats = new Map();
  for (const line of text.split("\n")) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (m) out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

export interface StatsDelta {
  /** EVALSHA/EVAL calls: one per script round-trip. */
  readonly scriptCalls: number;
  /** Commands run inside scripts, or sent alongside them (not INFO). */
  readonly otherCalls: number;
  /** Redis CPU time spent in script calls, µs (includes their inner commands). */
  readonly scriptUsec: number;
}

export function statsBetween(before: CommandStats, after: CommandStats): StatsDelta {
  let scriptCalls = 0;
  let otherCalls = 0;
  let scriptUsec = 0;
  for (const [cmd, s] of after) {
    if (cmd === "info") continue;
    const b = before.get(cmd) ?? { calls: 0, usec: 0 };
    if (SCRIPT_CALLS.has(cmd)) {
      scriptCalls += s.calls - b.calls;
      scriptUsec += s.usec - b.usec;
    } else otherCalls += s.calls - b.calls;
  }
  return { scriptCalls, otherCalls, scriptUsec };
}
