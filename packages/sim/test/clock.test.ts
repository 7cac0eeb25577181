import { describe, expect, it } from "vitest";
import { SimClock } from "../src/index.js";

describe("SimClock", () => {
  it("runs events in time order, ties in scheduling order", () => {
    const c = new SimClock();
    const log: string[] = [];
    c.schedule(30, () => log.push("c"));
    c.schedule(10, () => log.push("a1"));
    c.schedule(10, () => log.push("a2"));
    c.schedule(20, () => {
      log.push("b");
      c.schedule(0, () => log.push("b-child"));
    });
    expect(c.runUntilIdle()).toBe(5);
    expect(log).toEqual(["a1", "a2", "b", "b-child", "c"]);
    expect(c.nowUs()).toBe(30);
  });

  it("runUntil stops at the bound and advances time to it", () => {
    const c = new SimClock(1_000);
    const log: number[] = [];
    c.at(1_500, () => log.push(c.nowUs()));
    c.at(2_500, () => log.push(c.nowUs()));
    c.runUntil(2_000);
    expect(log).toEqual([1_500]);
    expect(c.nowUs()).toBe(2_000);
    expect(c.nowMs()).toBe(2);
    expect(c.pending).toBe(1);
    c.runFor(1_000);
    expect(log).toEqual([1_500, 2_500]);
  });

  it("cancel prevents an event; a self-rescheduling loop hits maxEvents", () => {
    const c = new SimClock();
    let ran = false;
    const id = c.schedule(5, () => {
      ran = true;
    });
    c.cancel(id);
    expect(c.pending).toBe(0);
    c.runUntilIdle();
    expect(ran).toBe(false);
    const loop = (): void => {
      c.schedule(1, loop);
    };
    loop();
    expect(() => c.runUntilIdle(100)).toThrow(/exceeded 100 events/);
  });

  it("rejects negative or non-finite delays", () => {
    const c = new SimClock();
    expect(() => c.schedule(-1, () => {})).toThrow(RangeError);
    expect(() => c.schedule(Number.NaN, () => {})).toThrow(RangeError);
  });
});
