// The peer clock estimator (src/daemon/clock-offsets.ts): deterministic
// exchanges on injected clocks, and the bound as a property: whatever the
// one-way delays, holds and read durations, the true offset lies in the
// estimated interval.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ClockCheckOptions, offsetInterval, PeerClocks } from "../src/daemon/clock-offsets.js";

const OPTS: ClockCheckOptions = {
  excludeAboveUs: 250_000,
  resumeAtOrBelowUs: 125_000,
  maxSampleAgeUs: 2_000_000,
};

/**
 * Two daemons on one real timeline: A's and B's Redis clocks are real +
 * redisA / redisB, their monotonic clocks real + monoA / monoB (any origin).
 * B reads at real tB (taking readB), sends; A receives after d1, holds, reads
 * (taking readA), sends; B receives after d2. Returns B's estimate of A.
 */
function exchange(w: {
  redisA: number;
  redisB: number;
  monoA: number;
  monoB: number;
  tB: number;
  readB: number;
  d1: number;
  hold: number;
  readA: number;
  readAt: number;
  d2: number;
}) {
  const a = new PeerClocks(["b"], OPTS);
  const b = new PeerClocks(["a"], OPTS);
  // B's read: sent at tB, TIME taken at tB + readAt·readB, answered at tB + readB.
  const tBread = w.tB + w.readAt * w.readB;
  b.localRead(Math.round(tBread + w.redisB), w.tB + w.monoB, w.tB + w.readB + w.monoB);
  const toA = b.outgoing("a");
  if (toA === undefined) throw new Error("no stamp");
  const arriveA = w.tB + w.readB + w.d1;
  a.incoming("b", toA, arriveA + w.monoA);
  const aStart = arriveA + w.hold;
  const tAread = aStart + w.readAt * w.readA;
  a.localRead(Math.round(tAread + w.redisA), aStart + w.monoA, aStart + w.readA + w.monoA);
  const toB = a.outgoing("b");
  if (toB === undefined) throw new Error("no stamp");
  const arriveB = aStart + w.readA + w.d2;
  return { result: b.incoming("a", toB, arriveB + w.monoB), stamp: toB, b };
}

describe("PeerClocks: one exchange", () => {
  it("estimates the offset within ± half the round trip less the peer's hold", () => {
    // A's Redis 400 ms ahead of B's; 30 ms out, 10 ms back, 200 ms hold at A.
    const { result, stamp } = exchange({
      redisA: 1_000_400_000,
      redisB: 1_000_000_000,
      monoA: 5_000,
      monoB: 77_000,
      tB: 1_000_000,
      readB: 0,
      d1: 30_000,
      hold: 200_000,
      readA: 0,
      readAt: 0,
      d2: 10_000,
    });
    expect(stamp.holdUs).toBe(200_000);
    expect(result).toEqual({
      ok: true,
      estimate: { offsetUs: 410_000, uncertaintyUs: 20_000, atMonoUs: 1_317_000 },
    });
  });

  it("a stamp without an echo, or echoing a forgotten read, gives no estimate", () => {
    const b = new PeerClocks(["a"], OPTS);
    expect(b.incoming("a", { txUs: 5, echoUs: 0, holdUs: 0 }, 10)).toEqual({
      ok: false,
      reason: "no echo yet",
    });
    expect(b.incoming("a", { txUs: 5, echoUs: 99, holdUs: 0 }, 10).ok).toBe(false);
    expect(b.incoming("zz", { txUs: 5, echoUs: 99, holdUs: 0 }, 10)).toEqual({
      ok: false,
      reason: "unknown peer zz",
    });
  });

  it("a hold longer than the round trip is refused (a peer lying or a monotonic clock jumping)", () => {
    const b = new PeerClocks(["a"], OPTS);
    b.localRead(1_000, 100, 110);
    expect(b.incoming("a", { txUs: 2_000, echoUs: 1_000, holdUs: 500 }, 300)).toEqual({
      ok: false,
      reason: "hold longer than the round trip",
    });
    expect(offsetInterval({ txUs: 2_000, echoUs: 1_000, holdUs: 50 }, 100, 300)).toEqual({
      lowUs: 800,
      highUs: 950,
    });
  });

  it("echoes only a stamp received before its own read started", () => {
    const a = new PeerClocks(["b"], OPTS);
    a.incoming("b", { txUs: 111, echoUs: 0, holdUs: 0 }, 1_000);
    a.incoming("b", { txUs: 222, echoUs: 0, holdUs: 0 }, 2_500); // arrives during the read below
    a.localRead(9_000, 2_000, 3_000);
    expect(a.outgoing("b")).toEqual({ txUs: 9_000, echoUs: 111, holdUs: 1_000 });
    a.localRead(9_500, 4_000, 4_100);
    expect(a.outgoing("b")).toEqual({ txUs: 9_500, echoUs: 222, holdUs: 1_500 });
    expect(new PeerClocks(["b"], OPTS).outgoing("b")).toBeUndefined();
  });
});

describe("PeerClocks: exclusion with hysteresis", () => {
  const sample = (b: PeerClocks, offsetUs: number, uncertaintyUs: number, atUs: number) => {
    // B's read at mono atUs − 2u (Redis atUs), A answers with hold 0: interval
    // [tx − echo − 2u, tx − echo], midpoint offset.
    const tx = 10_000_000 + atUs;
    b.localRead(tx, atUs - 2 * uncertaintyUs, atUs - 2 * uncertaintyUs);
    const r = b.incoming("a", { txUs: tx + offsetUs + uncertaintyUs, echoUs: tx, holdUs: 0 }, atUs);
    expect(r.ok).toBe(true);
  };

  it("starts excluded, resumes in range, leaves above the margin, returns only below the resume level", () => {
    const b = new PeerClocks(["a"], OPTS);
    expect(b.evaluate(0)).toEqual([]);
    expect(b.excluded("a")).toBe(true);
    expect(b.view("a")?.reason).toBe("no clock sample yet");
    sample(b, 50_000, 10_000, 1_000_000);
    expect(b.evaluate(1_000_000)).toEqual(["a"]);
    expect(b.excluded("a")).toBe(false);
    // Between resume (125 ms) and exclude (250 ms): stays in.
    sample(b, -200_000, 20_000, 1_200_000);
    expect(b.evaluate(1_200_000)).toEqual([]);
    expect(b.excluded("a")).toBe(false);
    // |offset| + uncertainty = 260 ms > 250 ms: out (once).
    sample(b, -240_000, 20_000, 1_400_000);
    expect(b.evaluate(1_400_000)).toEqual(["a"]);
    expect(b.evaluate(1_450_000)).toEqual([]);
    expect(b.excluded("a")).toBe(true);
    expect(b.view("a")?.reason).toBe("offset -240000 µs ± 20000 µs");
    // Back between the two levels: still out (hysteresis).
    sample(b, 150_000, 10_000, 1_600_000);
    expect(b.evaluate(1_600_000)).toEqual([]);
    expect(b.excluded("a")).toBe(true);
    sample(b, 100_000, 25_000, 1_800_000);
    expect(b.evaluate(1_800_000)).toEqual(["a"]);
    expect(b.excluded("a")).toBe(false);
  });

  it("a small offset with a large uncertainty is out: what matters is what the offset may be", () => {
    const b = new PeerClocks(["a"], OPTS);
    sample(b, 0, 300_000, 1_000_000);
    b.evaluate(1_000_000);
    expect(b.excluded("a")).toBe(true);
  });

  it("an estimate older than maxSampleAgeUs excludes the peer", () => {
    const b = new PeerClocks(["a"], OPTS);
    sample(b, 0, 1_000, 1_000_000);
    expect(b.evaluate(1_000_000)).toEqual(["a"]);
    expect(b.evaluate(3_000_000)).toEqual([]);
    expect(b.evaluate(3_000_001)).toEqual(["a"]);
    expect(b.view("a")?.reason).toBe("clock sample too old");
  });

  it("refuses inconsistent options", () => {
    expect(() => new PeerClocks([], { ...OPTS, resumeAtOrBelowUs: 300_000 })).toThrow(/resumeAtOrBelowUs/);
    expect(() => new PeerClocks([], { ...OPTS, maxSampleAgeUs: 0 })).toThrow(/maxSampleAgeUs/);
    const b = new PeerClocks([], OPTS);
    expect(() => b.localRead(1, 10, 5)).toThrow(/end after/);
  });
});

describe("PeerClocks: the bound (property)", () => {
  it("the true offset lies in offset ± uncertainty, whatever the delays, holds and read times", () => {
    const us = (max: number) => fc.integer({ min: 0, max });
    fc.assert(
      fc.property(
        fc.record({
          redisA: fc.integer({ min: 1_000_000_000, max: 2_000_000_000 }),
          redisB: fc.integer({ min: 1_000_000_000, max: 2_000_000_000 }),
          monoA: us(1_000_000_000),
          monoB: us(1_000_000_000),
          tB: us(1_000_000_000),
          readB: us(50_000),
          d1: us(2_000_000),
          hold: us(2_000_000),
          readA: us(50_000),
          readAt: fc.double({ min: 0, max: 1, noNaN: true }),
          d2: us(2_000_000),
        }),
        (w) => {
          const { result } = exchange(w);
          if (!result.ok) return false;
          const truth = w.redisA - w.redisB;
          // Redis TIME is read in whole µs: allow the rounding of the two reads.
          const { offsetUs, uncertaintyUs } = result.estimate;
          return Math.abs(truth - offsetUs) <= uncertaintyUs + 1;
        },
      ),
      { numRuns: 2_000, seed: 2026 },
    );
  });
});
