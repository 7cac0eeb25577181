import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Admission, checkGlobalBound, matchRefunds, type Refund } from "../src/index.js";

const limit = { capacity: 10, refillPerSecond: 2 };

describe("global-bound oracle", () => {
  it("accepts a burst of exactly C then exactly r per second", () => {
    const adm: Admission[] = [];
    for (let i = 0; i < 10; i++) adm.push({ sentMs: 0, answeredMs: 1, cost: 1 });
    for (let s = 1; s <= 5; s++) adm.push({ sentMs: s * 500, answeredMs: s * 500 + 1, cost: 1 });
    // 15 admitted over [0, 2501]: bound 10 + 2·2.501 = 15.002
    expect(checkGlobalBound(adm, limit).ok).toBe(true);
  });

  it("catches one admission over the bound, whole-run and in a sub-interval", () => {
    const adm: Admission[] = [];
    for (let i = 0; i < 11; i++) adm.push({ sentMs: 0, answeredMs: 1, cost: 1 });
    const v = checkGlobalBound(adm, limit);
    expect(v.ok).toBe(false);
    expect(v.worstExcess).toBeGreaterThan(0.9);

    // Inside a long run the whole-run bound holds, only a sub-interval breaks.
    const long: Admission[] = [{ sentMs: 0, answeredMs: 1, cost: 1 }];
    for (let i = 0; i < 11; i++) long.push({ sentMs: 100_000, answeredMs: 100_001, cost: 1 });
    long.push({ sentMs: 200_000, answeredMs: 200_001, cost: 1 });
    const w = checkGlobalBound(long, limit);
    expect(w.admitted).toBeLessThan(w.bound);
    expect(w.ok).toBe(false);
    expect(w.worstInterval).toMatchObject({ startMs: 100_000, endMs: 100_001, admitted: 11 });
  });

  it("has no tolerance: C + 0.001 over is a violation", () => {
    const v = checkGlobalBound([{ sentMs: 0, answeredMs: 0, cost: 10.001 }], limit);
    expect(v.ok).toBe(false);
  });

  it("agrees with a brute-force check over all (send, answer) interval pairs", () => {
    const admission = fc.record({
      sentMs: fc.integer({ min: 0, max: 5000 }),
      latencyMs: fc.integer({ min: 0, max: 300 }),
      cost: fc.integer({ min: 1, max: 4 }),
    });
    fc.assert(
      fc.property(fc.array(admission, { maxLength: 40 }), (raw) => {
        const adm = raw.map((a) => ({ sentMs: a.sentMs, answeredMs: a.sentMs + a.latencyMs, cost: a.cost }));
        let brute = true;
        for (const s of adm)
          for (const e of adm) {
            if (e.answeredMs < s.sentMs) continue;
            const inside = adm
              .filter((a) => a.sentMs >= s.sentMs && a.answeredMs <= e.answeredMs)
              .reduce((x, a) => x + a.cost, 0);
            if (inside > limit.capacity + (limit.refillPerSecond / 1000) * (e.answeredMs - s.sentMs) + 1e-9)
              brute = false;
          }
        expect(checkGlobalBound(adm, limit).ok).toBe(brute);
      }),
      { numRuns: 300 },
    );
  });

  describe("refunds erase the admission they name (DESIGN §7)", () => {
    const flat = { capacity: 10, refillPerSecond: 0 };
    // A burst of exactly C, each admission refundable by its id.
    const burst = (): Admission[] =>
      Array.from({ length: 10 }, (_, i) => ({ sentMs: 0, answeredMs: 1, cost: 1, id: `a${i}` }));
    const later = (n: number, at = 10): Admission[] =>
      Array.from({ length: n }, () => ({ sentMs: at, answeredMs: at + 1, cost: 1 }));
    const refund = (admissionId: string | undefined, cost = 1, at = 5): Refund => ({
      sentMs: at,
      answeredMs: at + 1,
      admissionId,
      cost,
    });

    it("a matched refund allows exactly its cost again", () => {
      expect(checkGlobalBound([...burst(), ...later(1)], flat, [refund("a0")])).toMatchObject({
        ok: true,
        admitted: 11,
        refundedMatched: 1,
        refundedUnmatched: 0,
      });
      expect(checkGlobalBound([...burst(), ...later(1)], flat).ok).toBe(false);
      expect(checkGlobalBound([...burst(), ...later(2)], flat, [refund("a0")]).ok).toBe(false);
    });

    it("refunds that match nothing count for nothing", () => {
      const cases: [string, Refund[], number][] = [
        ["a repeated refund", [refund("a0"), refund("a0", 1, 6)], 2],
        ["an unknown id", [refund("forged")], 1],
        ["no id at all", [refund(undefined)], 1],
        ["more than the admission's cost", [refund("a0", 2)], 2],
        ["sent before the admission was answered", [refund("a0", 1, 0.5)], 1],
      ];
      for (const [what, refunds, readmitted] of cases) {
        const v = checkGlobalBound([...burst(), ...later(readmitted)], flat, refunds);
        expect({ what, ok: v.ok, unmatched: v.refundedUnmatched }).toEqual({
          what,
          ok: false,
          unmatched: readmitted - (v.refundedMatched > 0 ? 1 : 0),
        });
      }
    });

    it("a refund erases its admission from every interval, before and after the refund", () => {
      // 11 admitted in [0, 1]; the refund at [5, 6] erases a0: what remains is 10 there.
      const adm = [...burst(), { sentMs: 0, answeredMs: 1, cost: 1 }];
      const v = checkGlobalBound(adm, flat, [refund("a0")]);
      expect(v).toMatchObject({ ok: true, admitted: 11, refundedMatched: 1 });
      // One more at 20 ms is one too many (r = 0): the refund gave a0 back, nothing else.
      expect(checkGlobalBound([...adm, ...later(1, 20)], flat, [refund("a0")]).ok).toBe(false);
      expect(v.worstInterval).toMatchObject({ admitted: 10 });
      // A partial refund erases only its part.
      expect(checkGlobalBound(adm, flat, [refund("a0", 0.5)]).worstExcess).toBeCloseTo(0.5, 9);
    });

    it("a refund is no fresh capacity: a late refund of an old admission does not pay for a burst", () => {
      // The audit's case: C admitted, the bucket refilled (r = 2/s: 10 in 5 s), a0 refunded at
      // 6 s, then C + 1 at once. Erasing a0 leaves C + 1 inside [6000, 6001]: over the bound
      // (counting the refund as capacity given back at 6 s would have accepted it).
      const late = Array.from({ length: 11 }, () => ({ sentMs: 6000, answeredMs: 6001, cost: 1 }));
      const v = checkGlobalBound([...burst(), ...late], limit, [refund("a0", 1, 5999)]);
      expect(v.ok).toBe(false);
      expect(v.worstInterval).toMatchObject({ startMs: 6000, endMs: 6001, admitted: 11 });
      expect(checkGlobalBound([...burst(), ...late.slice(1)], limit, [refund("a0", 1, 5999)]).ok).toBe(true);
    });

    it("matching: per admission, in send order, capped at the admission's cost", () => {
      const adm: Admission[] = [{ sentMs: 0, answeredMs: 1, cost: 3, id: "x" }];
      const m = matchRefunds(adm, [refund("x", 2, 7), refund("x", 2, 5), refund("x", 2, 9)]);
      expect(m.matched.map((r) => [r.sentMs, r.cost])).toEqual([
        [5, 2],
        [7, 1],
      ]);
      expect(m.unmatched).toBe(3);
      // Two admissions claiming one id: refunds of it are unidentifiable.
      const twice: Admission[] = [...adm, { sentMs: 2, answeredMs: 3, cost: 3, id: "x" }];
      expect(matchRefunds(twice, [refund("x")]).unmatched).toBe(1);
    });

    it("agrees with a brute-force check of the history without the refunded admissions", () => {
      const admission = fc.record({
        sentMs: fc.integer({ min: 0, max: 3000 }),
        latencyMs: fc.integer({ min: 0, max: 300 }),
        cost: fc.integer({ min: 1, max: 4 }),
      });
      const refundArb = fc.record({
        of: fc.nat(),
        delayMs: fc.integer({ min: -50, max: 2000 }),
        latencyMs: fc.integer({ min: 0, max: 300 }),
        cost: fc.integer({ min: 1, max: 5 }),
      });
      fc.assert(
        fc.property(
          fc.array(admission, { minLength: 1, maxLength: 25 }),
          fc.array(refundArb, { maxLength: 10 }),
          (raw, rawRefunds) => {
            const adm: Admission[] = raw.map((a, i) => ({
              sentMs: a.sentMs,
              answeredMs: a.sentMs + a.latencyMs,
              cost: a.cost,
              id: `a${i}`,
            }));
            const refunds: Refund[] = rawRefunds.map((r) => {
              const of = adm[r.of % adm.length]!;
              const sentMs = of.answeredMs + r.delayMs;
              return { sentMs, answeredMs: sentMs + r.latencyMs, admissionId: of.id, cost: r.cost };
            });
            const { erased } = matchRefunds(adm, refunds);
            // The history without what matched refunds erased, brute force over every
            // (send, answer) pair of what remains.
            const left = adm
              .map((a) => ({ ...a, cost: a.cost - (erased.get(a.id as string) ?? 0) }))
              .filter((a) => a.cost > 0);
            let brute = true;
            for (const s of left)
              for (const e of left) {
                if (e.answeredMs < s.sentMs) continue;
                const inside = left
                  .filter((a) => a.sentMs >= s.sentMs && a.answeredMs <= e.answeredMs)
                  .reduce((x, a) => x + a.cost, 0);
                if (
                  inside >
                  limit.capacity + (limit.refillPerSecond / 1000) * (e.answeredMs - s.sentMs) + 1e-9
                )
                  brute = false;
              }
            expect(checkGlobalBound(adm, limit, refunds).ok).toBe(brute);
          },
        ),
        { numRuns: 300 },
      );
    });
  });

  describe("across a policy change (a limit schedule)", () => {
    // Old limit until the change completed everywhere (8 000 ms), new from its proposal (5 000 ms).
    const change = (
      oldL: { capacity: number; refillPerSecond: number },
      newL: { capacity: number; refillPerSecond: number },
    ) => ({
      segments: [
        { fromMs: Number.NEGATIVE_INFINITY, toMs: 8000, ...oldL },
        { fromMs: 5000, toMs: Number.POSITIVE_INFINITY, ...newL },
      ],
    });
    const burst = (n: number, at: number): Admission[] =>
      Array.from({ length: n }, () => ({ sentMs: at, answeredMs: at + 1, cost: 1 }));

    it("bounds an interval before, inside and after the change by the old, the max and the new limit", () => {
      const raise = change({ capacity: 10, refillPerSecond: 0 }, { capacity: 20, refillPerSecond: 0 });
      expect(checkGlobalBound(burst(10, 1000), raise).ok).toBe(true);
      expect(checkGlobalBound(burst(11, 1000), raise).ok).toBe(false); // before: the old C
      expect(checkGlobalBound(burst(20, 6000), raise).ok).toBe(true); // inside: max(C_old, C_new)
      expect(checkGlobalBound(burst(21, 6000), raise).ok).toBe(false);
      const lower = change({ capacity: 20, refillPerSecond: 0 }, { capacity: 10, refillPerSecond: 0 });
      expect(checkGlobalBound(burst(20, 6000), lower).ok).toBe(true); // inside: max again
      expect(checkGlobalBound(burst(11, 9000), lower).ok).toBe(false); // after: the new C
      expect(checkGlobalBound(burst(10, 9000), lower).ok).toBe(true);
    });

    it("an interval spanning the change gets max(C) + max(r)·T, not the limit of either side", () => {
      const s = change({ capacity: 10, refillPerSecond: 1 }, { capacity: 16, refillPerSecond: 0 });
      // [4000, 9001] meets both: 16 + 1·5.001 = 21.001; each side alone admits ≤ 10 and ≤ 16.
      const adm = [...burst(10, 4000), ...burst(11, 9000)];
      expect(checkGlobalBound(adm, s).ok).toBe(true);
      expect(checkGlobalBound([...adm, ...burst(1, 4000)], s).ok).toBe(false);
    });

    it("refuses an interval no segment covers (a schedule with a gap is a test bug)", () => {
      const gap = {
        segments: [
          { fromMs: 0, toMs: 100, capacity: 1, refillPerSecond: 0 },
          { fromMs: 200, toMs: 300, capacity: 1, refillPerSecond: 0 },
        ],
      };
      expect(() => checkGlobalBound(burst(1, 150), gap)).toThrow(/no limit segment covers/);
    });

    it("agrees with a brute-force check over all (send, answer) pairs", () => {
      const admission = fc.record({
        sentMs: fc.integer({ min: 0, max: 4000 }),
        latencyMs: fc.integer({ min: 0, max: 300 }),
        cost: fc.integer({ min: 1, max: 4 }),
      });
      const lim = fc.record({
        capacity: fc.integer({ min: 1, max: 12 }),
        refillPerSecond: fc.integer({ min: 0, max: 6 }),
      });
      fc.assert(
        fc.property(
          fc.array(admission, { maxLength: 30 }),
          lim,
          lim,
          fc.integer({ min: 0, max: 4000 }),
          fc.integer({ min: 0, max: 2000 }),
          (raw, oldL, newL, from, span) => {
            const sched = change(oldL, newL);
            const segs = [
              { ...sched.segments[0]!, toMs: from + span },
              { ...sched.segments[1]!, fromMs: from },
            ];
            const adm = raw.map((a) => ({
              sentMs: a.sentMs,
              answeredMs: a.sentMs + a.latencyMs,
              cost: a.cost,
            }));
            let brute = true;
            for (const st of adm)
              for (const e of adm) {
                if (e.answeredMs < st.sentMs) continue;
                const t0 = st.sentMs;
                const t1 = e.answeredMs;
                const meets = segs.filter((g) => g.fromMs <= t1 && g.toMs > t0);
                const c = Math.max(...meets.map((g) => g.capacity));
                const r = Math.max(...meets.map((g) => g.refillPerSecond));
                const inside = adm
                  .filter((a) => a.sentMs >= t0 && a.answeredMs <= t1)
                  .reduce((x, a) => x + a.cost, 0);
                if (inside > c + (r / 1000) * (t1 - t0) + 1e-9) brute = false;
              }
            expect(checkGlobalBound(adm, { segments: segs }).ok).toBe(brute);
          },
        ),
        { numRuns: 300 },
      );
    });
  });
});
