// A refund erases the admission it names (DESIGN §7). The model's credit must
// leave the bucket no fuller than the same bucket would be had the refunded
// admissions never happened (the counterfactual: the history the oracle checks),
// whatever refilled, which share changes (loans granted, received, lapsing)
// came in between, and however many refunds came before. Checked against the
// model itself replaying the history without them, at every step.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  check,
  emptyKeyState,
  freshIncarnation,
  grantLoan,
  type KeyLimit,
  type KeyState,
  type LoanEntry,
  mergeRemote,
  peek,
  type RegionState,
  REFUND_FLOOR_ENTRIES,
  refund,
  refundErase,
  refundFloor,
  refundNote,
} from "../src/index.js";

const timing = { epsilonUs: 5_000, loanDurationUs: 200_000 };
const limit = (algorithm: "token_bucket" | "gcra"): KeyLimit => ({
  algorithm,
  capacity: 20,
  refillPerSecond: 40,
  baseShare: 500_000,
  floorShare: 20_000,
});

type Op =
  | { k: "check"; dt: number; cost: number }
  | { k: "lend"; dt: number; units: number; durMs: number }
  | { k: "borrow"; dt: number; units: number; durMs: number }
  | { k: "refund"; dt: number; pick: number; half: boolean };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant("check" as const),
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 400_000 })),
      cost: fc.constantFrom(0.5, 1, 2, 3, 5),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("lend" as const),
      dt: fc.integer({ min: 0, max: 50_000 }),
      units: fc.integer({ min: 1, max: 40 }).map((x) => x * 10_000),
      durMs: fc.integer({ min: 10, max: 200 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("borrow" as const),
      dt: fc.integer({ min: 0, max: 50_000 }),
      units: fc.integer({ min: 1, max: 40 }).map((x) => x * 10_000),
      durMs: fc.integer({ min: 10, max: 200 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant("refund" as const),
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 600_000 })),
      pick: fc.nat(),
      half: fc.boolean(),
    }),
  },
);

interface World {
  readonly eu: RegionState;
  readonly us: RegionState;
  readonly key: KeyState;
  readonly lender: KeyState;
}

function world(): World {
  return {
    eu: { region: "eu", marker: freshIncarnation(1) },
    us: { region: "us", marker: freshIncarnation(2) },
    key: emptyKeyState(),
    lender: emptyKeyState(),
  };
}

/** The share changes, identical in both worlds (they do not depend on the tokens). */
function shareOp(w: World, l: KeyLimit, op: Op, now: number): string {
  if (op.k === "lend") {
    const g = grantLoan(w.eu, "eu", w.key, l, timing, "us", op.units, op.durMs * 1000, now);
    return JSON.stringify(g);
  }
  if (op.k === "borrow") {
    const g = grantLoan(w.us, "us", w.lender, l, timing, "eu", op.units, op.durMs * 1000, now);
    if (g.ok) {
      const loan: LoanEntry = g.loan;
      mergeRemote(w.eu, "eu", w.key, l, timing, [{ lender: "us", loan }], new Map(), now);
    }
    return JSON.stringify(g);
  }
  return "";
}

describe("refunds erase the admission (DESIGN §7), on the model", () => {
  for (const algorithm of ["token_bucket", "gcra"] as const) {
    it(`${algorithm}: never fuller than the history without the refunded admissions`, () => {
      const l = limit(algorithm);
      let limited = 0;
      fc.assert(
        fc.property(fc.array(opArb, { minLength: 5, maxLength: 60 }), (ops) => {
          // Pass 1, the real history: which checks were admitted, what each refund erased.
          const real = world();
          let now = 10_000_000; // past recovery and a full refill: buckets start full
          const admitted: { i: number; us: number; cost: number; left: number }[] = [];
          const erased = new Map<number, number>();
          const tokens: number[] = [];
          const shares: string[] = [];
          for (const [i, op] of ops.entries()) {
            now += op.dt;
            if (op.k === "check") {
              if (check(real.eu, real.key, l, timing, op.cost, now).allowed) {
                admitted.push({ i, us: now, cost: op.cost, left: op.cost });
              }
            } else if (op.k === "refund") {
              const open = admitted.filter((a) => a.left > 0);
              const a = open[op.pick % Math.max(1, open.length)];
              if (a !== undefined) {
                const cost = op.half ? a.left / 2 : a.left;
                const before = peek(real.eu, real.key, l, timing, now);
                const after = refund(real.eu, real.key, l, timing, cost, a.us, now);
                if (after.remaining - before.remaining < Math.min(cost, before.capacity - before.remaining)) {
                  limited++;
                }
                a.left -= cost;
                erased.set(a.i, (erased.get(a.i) ?? 0) + cost);
              }
            } else {
              shares.push(shareOp(real, l, op, now));
            }
            tokens.push(peek(real.eu, real.key, l, timing, now).remaining);
          }
          // Pass 2, the history without what was refunded: the same admissions (less what their
          // refunds erased) must all pass, and the real bucket is never fuller.
          const cf = world();
          now = 10_000_000;
          const admittedAt = new Set(admitted.map((a) => a.i));
          let s = 0;
          for (const [i, op] of ops.entries()) {
            now += op.dt;
            if (op.k === "check" && admittedAt.has(i)) {
              const c = op.cost - (erased.get(i) ?? 0);
              if (c > 0) expect(check(cf.eu, cf.key, l, timing, c, now).allowed, `op ${i}`).toBe(true);
            } else if (op.k === "lend" || op.k === "borrow") {
              expect(shareOp(cf, l, op, now), `op ${i}`).toBe(shares[s++]);
            }
            const want = peek(cf.eu, cf.key, l, timing, now).remaining;
            expect(tokens[i] as number, `op ${i}`).toBeLessThanOrEqual(want + 1e-9);
          }
        }),
        { numRuns: 400 },
      );
      // The property would hold for a refund that gives nothing back: most must, some must not.
      expect(limited).toBeGreaterThan(20);
    });
  }

  it("the audit's case: a refund after the bucket refilled gives nothing back; at once, all of it", () => {
    const l = limit("token_bucket");
    const eu: RegionState = { region: "eu", marker: freshIncarnation(1) };
    const key = emptyKeyState();
    const t0 = 10_000_000;
    const cap = 10; // C·b/U
    for (let i = 0; i < 10; i++) expect(check(eu, key, l, timing, 1, t0).allowed).toBe(true);
    // Refunded at once: all of it back.
    expect(refund(eu, key, l, timing, 1, t0, t0 + 1).remaining).toBeCloseTo(1 + 20 * 1e-6, 9);
    // 1 s later the bucket is full again (10 tokens refill in 0.5 s): a refund of an old
    // admission gives nothing more, and 10 is all a burst gets.
    expect(refund(eu, key, l, timing, 1, t0, t0 + 1_000_000).remaining).toBe(cap);
    // Two refunds of admissions made before the bucket without the first was full: the second
    // must not count the headroom the first one's bucket never had.
    const k2 = emptyKeyState();
    const t1 = 20_000_000;
    expect(check(eu, k2, l, timing, 5, t1).allowed).toBe(true); // A1: 10 → 5
    expect(check(eu, k2, l, timing, 5, t1 + 1).allowed).toBe(true); // A2: 5 → 0
    // 9 tokens refill in 450 ms (20/s): 9; without A1 the bucket would have been full.
    expect(check(eu, k2, l, timing, 7, t1 + 450_001).allowed).toBe(true); // 9 → 2
    const r1 = refund(eu, k2, l, timing, 5, t1, t1 + 450_002); // headroom since A1: 1 at least
    const r2 = refund(eu, k2, l, timing, 5, t1 + 1, t1 + 450_003);
    // Without A1 and A2: full (10) at 450 ms, then 7 admitted: 3 (+ 2 µs of refill).
    expect(r1.remaining).toBeLessThanOrEqual(3 + 1e-4);
    expect(r2.remaining).toBeLessThanOrEqual(3 + 1e-4);
    expect(r2.remaining).toBeGreaterThan(2.9);
  });

  it("the list stays at most REFUND_FLOOR_ENTRIES long and merges towards the smaller headroom", () => {
    const list: number[] = [];
    for (let i = 0; i < 20; i++) refundNote(list, i * 10, i + 1);
    expect(list.length).toBe(2 * REFUND_FLOOR_ENTRIES);
    // The oldest admissions keep the smallest headroom ever seen (1 token), never more.
    expect(refundFloor(list, 0)).toBe(1);
    expect(refundFloor(list, 185)).toBe(20);
    expect(refundFloor(list, 191)).toBe(Number.POSITIVE_INFINITY);
    // A smaller headroom later covers every earlier admission.
    refundNote(list, 300, 0.5);
    expect(list).toEqual([300, 500]);
    expect(refundErase([0, 3000, 10, 4000], 5, 2)).toEqual([10, 2000]);
  });
});
