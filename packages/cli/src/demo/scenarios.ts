// The scenarios as data (pure): which region gets how much demand, and when a
// fault starts and ends, as offsets on the demo's timeline. `runSchedule`
// walks a plan on an injected clock, so the order and the timing are tested
// without a cluster.
import { SCENARIOS, type ScenarioName } from "./types.js";

export type ScenarioEvent =
  | { readonly kind: "cut"; readonly region: string }
  | { readonly kind: "heal"; readonly region: string }
  | { readonly kind: "flush"; readonly region: string };

export interface PlannedScenario {
  readonly name: ScenarioName;
  /** Offsets from the start of the run, ms. */
  readonly startMs: number;
  readonly endMs: number;
  /** Requests per second per region for the main key. */
  readonly demand: Readonly<Record<string, number>>;
  readonly events: ReadonlyArray<{ readonly atMs: number; readonly event: ScenarioEvent }>;
  readonly description: string;
}

export interface PlanOptions {
  readonly regionIds: readonly string[];
  /** Global demand for the main key, requests per second (well above r, so buckets stay drained). */
  readonly totalRatePerSecond: number;
  /** The region demand moves to in `shift` and that `partition` cuts off. */
  readonly hotRegion?: string;
  /** The region whose Redis `state-loss` flushes. */
  readonly flushRegion?: string;
}

/**
 * Relative length of each scenario when several share one --duration: at the
 * default 90 s, steady, state-loss and stream get 15 s each, shift and
 * partition 22.5 s (the shift's utilization is measured over its second half).
 */
const WEIGHT: Readonly<Record<ScenarioName, number>> = {
  steady: 2,
  shift: 3,
  partition: 3,
  "state-loss": 2,
  stream: 2,
};

export function parseScenarioFlag(value: string): ScenarioName[] | { error: string } {
  if (value === "all") return [...SCENARIOS];
  if ((SCENARIOS as readonly string[]).includes(value)) return [value as ScenarioName];
  return { error: `--scenario: expected one of ${SCENARIOS.join(", ")} or all, got "${value}"` };
}

function even(ids: readonly string[], total: number): Record<string, number> {
  return Object.fromEntries(ids.map((id) => [id, total / ids.length]));
}

export function planScenarios(
  names: readonly ScenarioName[],
  durationMs: number,
  o: PlanOptions,
): PlannedScenario[] {
  if (names.length === 0) throw new Error("planScenarios: no scenario");
  const ids = o.regionIds;
  const hot = o.hotRegion ?? ids[0]!;
  const flush = o.flushRegion ?? ids[1] ?? ids[0]!;
  const totalWeight = names.reduce((s, n) => s + WEIGHT[n], 0);
  const out: PlannedScenario[] = [];
  let start = 0;
  for (const [i, name] of names.entries()) {
    // The last scenario takes the rounding remainder, so the plan ends exactly at durationMs.
    const end =
      i === names.length - 1 ? durationMs : start + Math.round((durationMs * WEIGHT[name]) / totalWeight);
    const len = end - start;
    const at = (f: number) => start + Math.round(len * f);
    switch (name) {
      case "steady":
        out.push({
          name,
          startMs: start,
          endMs: end,
          demand: even(ids, o.totalRatePerSecond),
          events: [],
          description: "demand spread evenly over every region, above the global rate",
        });
        break;
      case "shift":
        out.push({
          name,
          startMs: start,
          endMs: end,
          demand: { ...even(ids, 0), [hot]: o.totalRatePerSecond },
          events: [],
          description: `all demand moves to ${hot}; its share should follow`,
        });
        break;
      case "partition":
        out.push({
          name,
          startMs: start,
          endMs: end,
          demand: { ...even(ids, 0), [hot]: o.totalRatePerSecond },
          events: [
            { atMs: at(0.25), event: { kind: "cut", region: hot } },
            { atMs: at(0.65), event: { kind: "heal", region: hot } },
          ],
          description: `${hot} is cut off from gossip, then healed; it falls back to its static slice`,
        });
        break;
      case "state-loss":
        out.push({
          name,
          startMs: start,
          endMs: end,
          demand: even(ids, o.totalRatePerSecond),
          events: [{ atMs: at(0.35), event: { kind: "flush", region: flush } }],
          description: `FLUSHALL on ${flush}'s Redis; it recovers conservatively`,
        });
        break;
      case "stream":
        // Requests keep flowing evenly; the stream clients run over this window (run-demo).
        out.push({
          name,
          startMs: start,
          endMs: end,
          demand: even(ids, o.totalRatePerSecond),
          events: [],
          description: "one tenant streams over WebSocket in every region at 10× its byte rate",
        });
        break;
    }
    start = end;
  }
  return out;
}

/** The clock the schedule runs on: real in the CLI, virtual in tests. */
export interface ScheduleClock {
  now(): number;
  /** Resolves after `ms` or when `signal` aborts, whichever first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export interface ScheduleHooks {
  onScenario(s: PlannedScenario, atMs: number): void | Promise<void>;
  onEvent(e: ScenarioEvent, s: PlannedScenario, atMs: number): void | Promise<void>;
}

/**
 * Walks the plan in order: starts each scenario, fires its events at their
 * offsets (a slow hook delays later steps but never reorders them), and
 * returns at the plan's end or when `signal` aborts.
 */
export async function runSchedule(
  plan: readonly PlannedScenario[],
  clock: ScheduleClock,
  hooks: ScheduleHooks,
  signal?: AbortSignal,
): Promise<void> {
  const origin = clock.now();
  const until = async (offsetMs: number) => {
    const wait = origin + offsetMs - clock.now();
    if (wait > 0) await clock.sleep(wait, signal);
  };
  for (const s of plan) {
    await until(s.startMs);
    if (signal?.aborted) return;
    await hooks.onScenario(s, clock.now() - origin);
    for (const { atMs, event } of s.events) {
      await until(atMs);
      if (signal?.aborted) return;
      await hooks.onEvent(event, s, clock.now() - origin);
    }
  }
  const last = plan[plan.length - 1];
  if (last) await until(last.endMs);
}

export const realClock: ScheduleClock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    }),
};
