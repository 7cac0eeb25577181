// The split refill (DESIGN §3, traps 1/10/11) against a brute-force bucket
// that steps one microsecond at a time: in each µs the bucket refills at the
// rate of the share in force and is clamped to that share's capacity. Numbers
// are chosen so every double operation is exact (shares multiples of U/64,
// rates multiples of 15,625/s: every token amount is a multiple of 1/4096),
// so the comparison is equality, no tolerance. A settle that clamps only at
// now, clamps to the larger capacity, or credits the whole interval at one
// share (coarse refill) differs from the brute force.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { capacityOf, rateOf, type Schedule, type SchedulePoint, settle } from "../src/index.js";

const U = 1_000_000;
const SHARE_STEP = U / 64;

const shareArb = fc.integer({ min: 0, max: 64 }).map((m) => m * SHARE_STEP);

interface Case {
  capacity: number;
  refill: number;
  tokens: number;
  tsUs: number;
  schedule: Schedule;
  nowUs: number;
}

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    capacity: fc.integer({ min: 1, max: 20 }),
    refillK: fc.integer({ min: 1, max: 4 }),
    share: shareArb,
    outstanding: fc.integer({ min: 0, max: 3 }),
    tokens64: fc.integer({ min: -64, max: 20 * 64 }),
    gaps: fc.array(
      fc.record({
        gap: fc.integer({ min: 1, max: 400 }),
        share: shareArb,
        o: fc.integer({ min: 0, max: 3 }),
      }),
      {
        minLength: 0,
        maxLength: 5,
      },
    ),
    tail: fc.integer({ min: 0, max: 400 }),
  })
  .map(({ capacity, refillK, share, outstanding, tokens64, gaps, tail }) => {
    const tsUs = 1_000_000;
    const next: SchedulePoint[] = [];
    let t = tsUs;
    for (const g of gaps) {
      t += g.gap;
      next.push({ atUs: t, share: g.share, outstanding: g.o });
    }
    const cap0 = capacityOf(capacity, share, outstanding);
    return {
      capacity,
      refill: 15_625 * refillK,
      tokens: Math.min(cap0, tokens64 / 64),
      tsUs,
      schedule: { share, outstanding, next },
      nowUs: t - (gaps.length > 0 ? Math.floor(tail / 2) : 0) + tail,
    };
  });

/** One µs at a time: refill at the share in force during [t, t+1), clamp to its capacity. */
function bruteForce(c: Case): number {
  let tk = c.tokens;
  let share = c.schedule.share;
  let outstanding = c.schedule.outstanding;
  let i = 0;
  for (let t = c.tsUs; t < c.nowUs; t++) {
    const p = c.schedule.next[i];
    if (p !== undefined && p.atUs === t) {
      share = p.share;
      outstanding = p.outstanding;
      i++;
    }
    tk = Math.min(capacityOf(c.capacity, share, outstanding), tk + rateOf(c.refill, share) / 1_000_000);
  }
  // A change at exactly now: its capacity already binds.
  const p = c.schedule.next[i];
  if (p !== undefined && p.atUs === c.nowUs)
    tk = Math.min(capacityOf(c.capacity, p.share, p.outstanding), tk);
  return tk;
}

describe("split refill = a bucket stepped one µs at a time", () => {
  it("every piece at its own rate, clamped to its own capacity (traps 1/10)", () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const got = settle(c.tokens, c.tsUs, c.schedule, c.capacity, c.refill, c.nowUs);
        expect(got.tokens).toBe(bruteForce(c));
        expect(got.tsUs).toBe(Math.max(c.tsUs, c.nowUs));
        expect(got.schedule.next).toEqual(c.schedule.next.filter((p) => p.atUs > c.nowUs));
      }),
      { numRuns: 400 },
    );
  });

  it("the lender case: full at the lower capacity, the share rises twice before now", () => {
    // Reserved 32/64 of the share until t+100, then 16/64 until t+200, then none.
    const schedule: Schedule = {
      share: 16 * SHARE_STEP,
      outstanding: 0,
      next: [
        { atUs: 1_000_100, share: 32 * SHARE_STEP, outstanding: 0 },
        { atUs: 1_000_200, share: 48 * SHARE_STEP, outstanding: 0 },
      ],
    };
    const c: Case = { capacity: 16, refill: 15_625, tokens: 4, tsUs: 1_000_000, schedule, nowUs: 1_000_250 };
    const got = settle(c.tokens, c.tsUs, c.schedule, c.capacity, c.refill, c.nowUs);
    expect(got.tokens).toBe(bruteForce(c));
  });
});
