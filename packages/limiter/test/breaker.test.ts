import { describe, expect, it } from "vitest";
import { CircuitBreaker, PERMIT_DENIED, PERMIT_NORMAL, PERMIT_PROBE } from "../src/breaker.js";
import { manualClock } from "./helpers/config.js";

const opts = { failureThreshold: 3, openMs: 1000, halfOpenProbes: 1, closeAfterSuccesses: 2 };

describe("circuit breaker (injected clock)", () => {
  it("closed → open after consecutive failures; a success resets the count", () => {
    const c = manualClock();
    const b = new CircuitBreaker(opts, c.now);
    const fail = () => b.onResult(b.tryAcquire(), false);
    fail();
    fail();
    b.onResult(b.tryAcquire(), true);
    fail();
    fail();
    expect(b.state).toBe("closed");
    fail();
    expect(b.state).toBe("open");
    expect(b.tryAcquire()).toBe(PERMIT_DENIED);
    expect(b.msUntilProbe()).toBe(1000);
  });

  it("open → half-open after openMs, bounded probes, closes after enough successes", () => {
    const c = manualClock();
    const b = new CircuitBreaker(opts, c.now);
    const states: string[] = [];
    b.onStateChange((s) => states.push(s));
    for (let i = 0; i < 3; i++) b.onResult(b.tryAcquire(), false);
    c.advance(999);
    expect(b.tryAcquire()).toBe(PERMIT_DENIED);
    c.advance(1);
    expect(b.state).toBe("half_open");
    const probe = b.tryAcquire();
    expect(probe).toBe(PERMIT_PROBE);
    expect(b.tryAcquire()).toBe(PERMIT_DENIED); // one probe in flight at most
    b.onResult(probe, true);
    expect(b.state).toBe("half_open");
    b.onResult(b.tryAcquire(), true);
    expect(b.state).toBe("closed");
    expect(b.tryAcquire()).toBe(PERMIT_NORMAL);
    expect(states).toEqual(["open", "half_open", "closed"]);
  });

  it("a failed probe reopens for a full openMs", () => {
    const c = manualClock();
    const b = new CircuitBreaker(opts, c.now);
    for (let i = 0; i < 3; i++) b.onResult(b.tryAcquire(), false);
    c.advance(1000);
    b.onResult(b.tryAcquire(), false);
    expect(b.state).toBe("open");
    c.advance(999);
    expect(b.tryAcquire()).toBe(PERMIT_DENIED);
    c.advance(1);
    expect(b.tryAcquire()).toBe(PERMIT_PROBE);
  });

  it("late results of calls started while closed do not close or reopen a probing breaker", () => {
    const c = manualClock();
    const b = new CircuitBreaker(opts, c.now);
    const early = b.tryAcquire();
    for (let i = 0; i < 3; i++) b.onResult(b.tryAcquire(), false);
    c.advance(1000);
    const probe = b.tryAcquire();
    b.onResult(early, true); // stale success: says nothing about recovery
    expect(b.state).toBe("half_open");
    b.onResult(early, false);
    expect(b.state).toBe("half_open");
    b.onResult(probe, true);
    b.onResult(b.tryAcquire(), true);
    expect(b.state).toBe("closed");
  });
});
