// The one in-memory token bucket (stream local cap, fail-open, gossip frame
// budget): refill is refillPiece's, takes are whole or partial.
import { describe, expect, it } from "vitest";
import { MemoryBucket } from "../src/index.js";

describe("MemoryBucket", () => {
  it("refills at the rate up to capacity, takes whole or partial, and predicts the wait", () => {
    let now = 1_000;
    const b = new MemoryBucket(10, 4, () => now, 0);
    expect(b.take(1)).toBe(false);
    now += 500; // +2 tokens
    expect(b.level()).toBeCloseTo(2, 12);
    expect(b.msUntil(5)).toBeCloseTo(750, 9);
    expect(b.takeUpTo(5)).toBe(2);
    now += 10_000; // far past full: clamped at capacity
    expect(b.available()).toBe(10);
    expect(b.take(10)).toBe(true);
    expect(b.take(0.5)).toBe(false);
    // A clock that steps back credits nothing.
    now -= 100;
    expect(b.level()).toBe(0);
  });

  it("capacity 0 never admits; bad limits are refused naming them", () => {
    const b = new MemoryBucket(0, 0, () => 0);
    expect(b.take(1)).toBe(false);
    expect(b.msUntil(1)).toBe(0);
    expect(() => new MemoryBucket(-1, 1, () => 0)).toThrow(/capacity >= 0/);
    expect(() => new MemoryBucket(1, Number.NaN, () => 0)).toThrow(/refill >= 0/);
  });
});
