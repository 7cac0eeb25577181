// Structured log events shared by the limiter and the gossip daemon: every
// event carries `event: <name>`, so logs can be filtered and alerted on
// without parsing messages. Noisy events (Redis errors during an outage) go
// through a throttle: at most one line per kind per interval, carrying the
// number of lines suppressed since the last one.
import { ConfigError } from "./errors.js";

/** The logging surface needed here; a pino Logger and Fastify's `app.log` satisfy it. */
export interface EventLogger {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export type EventLevel = "error" | "warn" | "info";

/** Levels accepted by `LOG_LEVEL` and the region config's `logLevel`. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The level a process logs at: `LOG_LEVEL` from the environment wins over the
 * config file's value. A bad `LOG_LEVEL` is a ConfigError naming the variable (the CLI exits 2).
 */
export function logLevelOf(
  configured: LogLevel,
  env: Readonly<Record<string, string | undefined>>,
): LogLevel {
  const v = env.LOG_LEVEL;
  if (v === undefined || v === "") return configured;
  if ((LOG_LEVELS as readonly string[]).includes(v)) return v as LogLevel;
  throw new ConfigError("environment", [
    `LOG_LEVEL: expected one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(v)}`,
  ]);
}

interface KindState {
  lastMs: number;
  suppressed: number;
}

/**
 * At most one line per `kind` per `intervalMs`; lines in between are counted
 * and the count is reported as `suppressed` on the next line of that kind.
 * Kinds should come from a bounded set (an operation name, not a key).
 */
export class ThrottledEvents {
  private readonly kinds = new Map<string, KindState>();

  constructor(
    private readonly log: EventLogger,
    private readonly intervalMs = 1000,
    private readonly now: () => number = () => performance.now(),
    private readonly kindsMax = 256,
  ) {}

  /** Logs `{ event, kind, suppressed, ...fields }` unless this kind logged within the interval. */
  emit(level: EventLevel, event: string, kind: string, fields: object, msg: string): boolean {
    const id = `${event}\u0000${kind}`;
    const t = this.now();
    const s = this.kinds.get(id);
    if (s !== undefined && t - s.lastMs < this.intervalMs) {
      s.suppressed++;
      return false;
    }
    const suppressed = s?.suppressed ?? 0;
    if (s === undefined && this.kinds.size >= this.kindsMax) this.kinds.clear();
    this.kinds.set(id, { lastMs: t, suppressed: 0 });
    this.log[level]({ event, kind, suppressed, ...fields }, msg);
    return true;
  }
}
