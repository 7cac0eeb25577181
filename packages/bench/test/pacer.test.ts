// The open-loop pacer of the load generators (src/pacer.ts): each region is sent
// its rate whatever the answers, a region with `inFlightMax` outstanding sheds
// instead of queueing, and credit accrues from start, not from construction.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Pacer } from "../src/pacer.js";

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "performance"] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("pacer", () => {
  it("sends each region its own rate, whatever the answers", () => {
    const sent = [0, 0];
    const p = new Pacer(2, 1000, (r, settled) => {
      sent[r] = (sent[r] ?? 0) + 1;
      settled();
    });
    p.setRates([100, 30]);
    p.start();
    vi.advanceTimersByTime(2000);
    expect(sent[0]).toBeGreaterThanOrEqual(199);
    expect(sent[0]).toBeLessThanOrEqual(200);
    expect(sent[1]).toBeGreaterThanOrEqual(59);
    expect(sent[1]).toBeLessThanOrEqual(60);
    expect(p.shed).toBe(0);
  });

  it("a region with inFlightMax outstanding sheds, and sends again once one settles", () => {
    const pending: Array<() => void> = [];
    const p = new Pacer(1, 3, (_r, settled) => pending.push(settled));
    p.setRates([100]);
    p.start();
    vi.advanceTimersByTime(1000);
    expect(pending).toHaveLength(3);
    expect(p.shed).toBeGreaterThanOrEqual(96);
    pending[0]?.();
    pending[0]?.(); // a second settle of one request counts once
    vi.advanceTimersByTime(100);
    expect(pending).toHaveLength(4);
  });

  it("credit accrues from start, not from construction", () => {
    let sent = 0;
    const p = new Pacer(1, 1000, (_r, settled) => {
      sent++;
      settled();
    });
    p.setRates([100]);
    vi.advanceTimersByTime(5000);
    p.start();
    vi.advanceTimersByTime(10);
    expect(sent).toBeLessThanOrEqual(1);
  });

  it("stop waits for the requests in flight", async () => {
    const pending: Array<() => void> = [];
    const p = new Pacer(1, 10, (_r, settled) => pending.push(settled));
    p.setRates([100]);
    p.start();
    vi.advanceTimersByTime(50);
    let stopped = false;
    const stopping = p.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(200);
    expect(stopped).toBe(false);
    for (const s of pending) s();
    await vi.advanceTimersByTimeAsync(100);
    await stopping;
    expect(stopped).toBe(true);
  });
});
