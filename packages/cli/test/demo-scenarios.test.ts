import { describe, expect, it } from "vitest";
import {
  type PlannedScenario,
  parseScenarioFlag,
  planScenarios,
  runSchedule,
  type ScheduleClock,
} from "../src/demo/scenarios.js";
import { SCENARIOS } from "../src/demo/types.js";

const ids = ["us-east", "eu-west", "ap-south"];
const opts = { regionIds: ids, totalRatePerSecond: 150, hotRegion: "us-east", flushRegion: "eu-west" };

/** A virtual clock: sleeping advances time at once, so a 90 s plan runs in microseconds. */
function virtualClock(): ScheduleClock & { t: number } {
  const c = {
    t: 1000,
    now: () => c.t,
    sleep: async (ms: number) => {
      c.t += ms;
    },
  };
  return c;
}

describe("planScenarios", () => {
  it("walks every scenario in order and fills the duration exactly", () => {
    const plan = planScenarios(SCENARIOS, 90_000, opts);
    expect(plan.map((s) => s.name)).toEqual(["steady", "shift", "partition", "state-loss", "stream"]);
    // The default 90 s: 15 s each for steady, state-loss and stream; 22.5 s for shift and partition.
    expect(plan.map((s) => s.endMs - s.startMs)).toEqual([15_000, 22_500, 22_500, 15_000, 15_000]);
    expect(plan[0]!.startMs).toBe(0);
    expect(plan.at(-1)!.endMs).toBe(90_000);
    for (let i = 1; i < plan.length; i++) expect(plan[i]!.startMs).toBe(plan[i - 1]!.endMs);
    for (const s of plan)
      for (const e of s.events) {
        expect(e.atMs).toBeGreaterThan(s.startMs);
        expect(e.atMs).toBeLessThan(s.endMs);
      }
  });

  it("spreads steady demand evenly and moves all of it to the hot region in shift", () => {
    const [steady, shift] = planScenarios(["steady", "shift"], 20_000, opts);
    expect(Object.values(steady!.demand)).toEqual([50, 50, 50]);
    expect(shift!.demand).toEqual({ "us-east": 150, "eu-west": 0, "ap-south": 0 });
  });

  it("cuts then heals the hot region in partition, and flushes eu-west in state-loss", () => {
    const [p, s] = planScenarios(["partition", "state-loss"], 50_000, opts);
    expect(p!.events.map((e) => e.event)).toEqual([
      { kind: "cut", region: "us-east" },
      { kind: "heal", region: "us-east" },
    ]);
    expect(s!.events.map((e) => e.event)).toEqual([{ kind: "flush", region: "eu-west" }]);
  });

  it("keeps requests flowing evenly while the stream scenario runs", () => {
    const [st] = planScenarios(["stream"], 20_000, opts);
    expect(st!.demand).toEqual({ "us-east": 50, "eu-west": 50, "ap-south": 50 });
    expect(st!.events).toEqual([]);
    expect([st!.startMs, st!.endMs]).toEqual([0, 20_000]);
  });

  it("gives one scenario the whole duration", () => {
    const plan = planScenarios(["shift"], 20_000, opts);
    expect(plan).toHaveLength(1);
    expect([plan[0]!.startMs, plan[0]!.endMs]).toEqual([0, 20_000]);
  });
});

describe("parseScenarioFlag", () => {
  it("accepts the names and all, and refuses the rest with a message", () => {
    expect(parseScenarioFlag("all")).toEqual([...SCENARIOS]);
    expect(parseScenarioFlag("state-loss")).toEqual(["state-loss"]);
    expect(parseScenarioFlag("stream")).toEqual(["stream"]);
    expect(parseScenarioFlag("nope")).toEqual({ error: expect.stringContaining('got "nope"') });
  });
});

describe("runSchedule (injected clock)", () => {
  it("fires scenario starts and events in order, at their offsets", async () => {
    const plan = planScenarios(SCENARIOS, 90_000, opts);
    const clock = virtualClock();
    const calls: string[] = [];
    await runSchedule(plan, clock, {
      onScenario: (s, at) => void calls.push(`${at} start ${s.name}`),
      onEvent: (e, _s, at) => void calls.push(`${at} ${e.kind} ${e.region}`),
    });
    const at = (name: string) => plan.find((s: PlannedScenario) => s.name === name)!;
    const p = at("partition");
    const sl = at("state-loss");
    expect(calls).toEqual([
      "0 start steady",
      `${at("shift").startMs} start shift`,
      `${p.startMs} start partition`,
      `${p.events[0]!.atMs} cut us-east`,
      `${p.events[1]!.atMs} heal us-east`,
      `${sl.startMs} start state-loss`,
      `${sl.events[0]!.atMs} flush eu-west`,
      `${at("stream").startMs} start stream`,
    ]);
    expect(clock.t - 1000).toBe(90_000); // returns at the plan's end, not earlier
  });

  it("a slow hook delays later steps but never reorders or skips them", async () => {
    const plan = planScenarios(["partition"], 10_000, opts);
    const clock = virtualClock();
    const calls: Array<[string, number]> = [];
    await runSchedule(plan, clock, {
      onScenario: () => {
        clock.t += 6000; // e.g. a hung API call: past the cut's offset (2.5 s)
      },
      onEvent: (e, _s, at) => void calls.push([e.kind, at]),
    });
    expect(calls).toEqual([
      ["cut", 6000],
      ["heal", 6500],
    ]);
  });

  it("returns early when aborted, without firing later steps", async () => {
    const plan = planScenarios(SCENARIOS, 90_000, opts);
    const clock = virtualClock();
    const ac = new AbortController();
    const calls: string[] = [];
    await runSchedule(
      plan,
      clock,
      {
        onScenario: (s) => {
          calls.push(s.name);
          if (s.name === "shift") ac.abort();
        },
        onEvent: (e) => void calls.push(e.kind),
      },
      ac.signal,
    );
    expect(calls).toEqual(["steady", "shift"]);
  });
});
