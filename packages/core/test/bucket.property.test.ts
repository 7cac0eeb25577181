// Property tests of the bucket math: a piecewise refill never exceeds the
// capacity of the current piece, and across two regions lending to each other
// the global admissions stay within C + r·T (G1) on the model's own arithmetic.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  capacityOf,
  check,
  emptyKeyState,
  freshIncarnation,
  grantLoan,
  type KeyLimit,
  mergeRemote,
  type RegionState,
  receiveReturn,
  returnLoan,
  type Schedule,
  settle,
} from "../src/index.js";

describe("piecewise refill", () => {
  const schedule = fc
    .array(
      fc.record({
        dt: fc.integer({ min: 1, max: 2_000_000 }),
        share: fc.integer({ min: 0, max: 1_000_000 }),
      }),
      {
        maxLength: 6,
      },
    )
    .map((pts) => {
      let t = 0;
      return pts.map((p) => {
        t += p.dt;
        return { atUs: t, share: p.share, outstanding: 0 };
      });
    });

  it("tokens never exceed the capacity of the piece in force", () => {
    fc.assert(
      fc.property(
        schedule,
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.array(fc.integer({ min: 0, max: 3_000_000 }), { minLength: 1, maxLength: 6 }),
        (next, s0, steps) => {
          let sc: Schedule = { share: s0, outstanding: 0, next };
          let tokens = capacityOf(100, s0, 0);
          let ts = 0;
          for (const dt of steps) {
            const r = settle(tokens, ts, sc, 100, 10, ts + dt);
            ({ tokens, tsUs: ts, schedule: sc } = r);
            expect(tokens).toBeLessThanOrEqual(capacityOf(100, sc.share, sc.outstanding) + 1e-9);
          }
        },
      ),
    );
  });

  it("one settle across a rise equals settling at the rise then at now (no new rate before the rise)", () => {
    const sc: Schedule = {
      share: 100_000,
      outstanding: 0,
      next: [{ atUs: 250_000, share: 500_000, outstanding: 0 }],
    };
    // C = 100, r = 100: 10/s then 50/s; empty at 0, now = 400 ms.
    const r = settle(0, 0, sc, 100, 100, 400_000);
    expect(r.tokens).toBeCloseTo(2.5 + 7.5, 9);
    expect(r.schedule.next).toEqual([]);
  });
});

describe("G1 on the model: two regions lending, admitted ≤ C + r·T", () => {
  const limit = (base: number): KeyLimit => ({
    algorithm: "token_bucket",
    capacity: 20,
    refillPerSecond: 10,
    baseShare: base,
    floorShare: 20_000,
  });
  const timing = { epsilonUs: 50_000, loanDurationUs: 300_000 };
  const step = fc.record({
    dt: fc.integer({ min: 0, max: 120_000 }),
    who: fc.constantFrom(0, 1),
    what: fc.constantFrom("check", "check", "check", "grant", "deliver", "return"),
    cost: fc.constantFrom(0.5, 1, 2, 3),
    units: fc.integer({ min: 1, max: 600_000 }),
  });

  it("holds over random demand, grants, deliveries and returns", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 10, maxLength: 80 }), (steps) => {
        const names: readonly [string, string] = ["eu", "us"];
        const regions: RegionState[] = names.map((n) => ({ region: n, marker: freshIncarnation(1) }));
        const keys = [emptyKeyState(), emptyKeyState()];
        const limits = [limit(500_000), limit(500_000)];
        const inflight: {
          to: number;
          loan: { units: number; deadlineUs: number; seq: number };
          from: string;
        }[] = [];
        let now = 1_000_000;
        const start = now;
        let admitted = 0;
        for (const s of steps) {
          now += s.dt;
          const i = s.who as 0 | 1;
          const j = (1 - i) as 0 | 1;
          const [r, k, l] = [regions[i]!, keys[i]!, limits[i]!];
          if (s.what === "check") {
            if (check(r, k, l, timing, s.cost, now).allowed) admitted += s.cost;
          } else if (s.what === "grant") {
            const g = grantLoan(r, names[i], k, l, timing, names[j], s.units, timing.loanDurationUs, now);
            if (g.ok) inflight.push({ to: j, loan: g.loan, from: names[i] });
          } else if (s.what === "deliver") {
            const m = inflight.shift();
            if (m) {
              mergeRemote(
                regions[m.to]!,
                names[m.to]!,
                keys[m.to]!,
                limits[m.to]!,
                timing,
                [{ lender: m.from, loan: m.loan }],
                new Map(),
                now,
              );
            }
          } else {
            const back = returnLoan(r, k, l, timing, names[j], now);
            if (back.seq > 0)
              receiveReturn(regions[j]!, keys[j]!, limits[j]!, timing, names[i], back.seq, now);
          }
        }
        expect(admitted).toBeLessThanOrEqual(20 + (10 * (now - start)) / 1e6 + 1e-9);
      }),
      { numRuns: 300 },
    );
  });
});
