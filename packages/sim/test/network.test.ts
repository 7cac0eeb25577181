import { describe, expect, it } from "vitest";
import { latency, Rng, SimClock, SimNetwork } from "../src/index.js";

function setup(seed = 1) {
  const clock = new SimClock();
  const net = new SimNetwork<number>({ clock, rng: new Rng(seed) });
  const inbox = new Map<string, Array<[string, number]>>();
  for (const id of ["a", "b", "c"]) {
    inbox.set(id, []);
    net.addNode(id, (from, msg) => inbox.get(id)?.push([from, msg]));
  }
  return { clock, net, inbox };
}

describe("SimNetwork", () => {
  it("delivers after the link latency", () => {
    const { clock, net, inbox } = setup();
    net.setLink("a", "b", { latencyUs: latency.fixed(500) });
    net.send("a", "b", 1);
    clock.runUntil(499);
    expect(inbox.get("b")).toEqual([]);
    clock.runUntil(500);
    expect(inbox.get("b")).toEqual([["a", 1]]);
    expect(net.stats.delivered).toBe(1);
  });

  it("reorders with random latency and duplicates at the configured rate", () => {
    const { clock, net, inbox } = setup(3);
    net.setDefaultLink({ latencyUs: latency.uniform(0, 10_000), duplicateRate: 0.5 });
    for (let i = 0; i < 200; i++) net.send("a", "b", i);
    clock.runUntilIdle();
    const got = inbox.get("b")?.map(([, m]) => m) ?? [];
    expect(got.length).toBe(200 + net.stats.duplicated);
    expect(net.stats.duplicated).toBeGreaterThan(50);
    expect(got).not.toEqual([...got].sort((x, y) => x - y));
    expect(new Set(got).size).toBe(200);
  });

  it("drops at the configured rate", () => {
    const { clock, net, inbox } = setup(4);
    net.setDefaultLink({ dropRate: 0.3 });
    for (let i = 0; i < 1000; i++) net.send("a", "c", i);
    clock.runUntilIdle();
    expect(net.stats.dropped).toBeGreaterThan(200);
    expect(net.stats.dropped).toBeLessThan(400);
    expect(inbox.get("c")?.length).toBe(1000 - net.stats.dropped);
  });

  it("partitions one way, loses in-flight messages on a cut, and heals", () => {
    const { clock, net, inbox } = setup();
    net.setDefaultLink({ latencyUs: latency.fixed(100) });
    net.partition(["a"], ["b"], { oneWay: true });
    net.send("a", "b", 1);
    net.send("b", "a", 2);
    clock.runUntilIdle();
    expect(inbox.get("b")).toEqual([]);
    expect(inbox.get("a")).toEqual([["b", 2]]);
    net.heal();
    net.send("a", "b", 3);
    net.isolate("b");
    clock.runUntilIdle();
    expect(inbox.get("b")).toEqual([]);
    expect(net.stats.blocked).toBe(2);
    net.heal();
    net.send("a", "b", 4);
    clock.runUntilIdle();
    expect(inbox.get("b")).toEqual([["a", 4]]);
    expect(net.inFlight).toBe(0);
  });

  it("is deterministic for a seed", () => {
    const run = (seed: number) => {
      const { clock, net, inbox } = setup(seed);
      net.setDefaultLink({ latencyUs: latency.exponential(100, 1000), dropRate: 0.2, duplicateRate: 0.2 });
      for (let i = 0; i < 100; i++) net.send(i % 2 ? "a" : "c", "b", i);
      clock.runUntilIdle();
      return inbox.get("b");
    };
    expect(run(11)).toEqual(run(11));
    expect(run(11)).not.toEqual(run(12));
  });
});
