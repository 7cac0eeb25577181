import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CrdtMap, GCounter, KeyRecord, LoanRegister, PNCounter, ReturnedRegister } from "../src/index.js";
import {
  amountArb,
  gcounterArb,
  keyArb,
  loanArb,
  loansArb,
  mapArb,
  pnArb,
  recordArb,
  regionArb,
  replicaArb,
  returnedArb,
} from "./arbitraries.js";

interface Lattice<S> {
  name: string;
  arb: fc.Arbitrary<S>;
  join(a: S, b: S): S;
  mergeInto(t: S, s: S): boolean;
  copy(s: S): S;
  equals(a: S, b: S): boolean;
  leq(a: S, b: S): boolean;
}

const lattices: Lattice<unknown>[] = [
  {
    name: "GCounter",
    arb: gcounterArb,
    join: GCounter.join,
    mergeInto: GCounter.mergeInto,
    copy: (s) => new Map(s),
    equals: GCounter.equals,
    leq: GCounter.leq,
  } as Lattice<GCounter>,
  {
    name: "PNCounter",
    arb: pnArb,
    join: PNCounter.join,
    mergeInto: PNCounter.mergeInto,
    copy: (s) => ({ p: new Map(s.p), n: new Map(s.n) }),
    equals: PNCounter.equals,
    leq: PNCounter.leq,
  } as Lattice<PNCounter>,
  {
    name: "LoanRegister",
    arb: loansArb,
    join: (a, b) => LoanRegister.join(a, b),
    mergeInto: (t, s) => LoanRegister.mergeInto(t, s),
    copy: (s) => new Map(s),
    equals: LoanRegister.equals,
    leq: LoanRegister.leq,
  } as Lattice<LoanRegister>,
  {
    name: "ReturnedRegister",
    arb: returnedArb,
    join: ReturnedRegister.join,
    mergeInto: ReturnedRegister.mergeInto,
    copy: (s) => new Map(s),
    equals: ReturnedRegister.equals,
    leq: ReturnedRegister.leq,
  } as Lattice<ReturnedRegister>,
  {
    name: "KeyRecord",
    arb: recordArb,
    join: (a, b) => KeyRecord.join(a, b),
    mergeInto: (t, s) => KeyRecord.mergeInto(t, s),
    copy: KeyRecord.copy,
    equals: KeyRecord.equals,
    leq: KeyRecord.leq,
  } as Lattice<KeyRecord>,
  {
    name: "CrdtMap",
    arb: mapArb,
    join: (a, b) => CrdtMap.join(a, b),
    mergeInto: (t, s) => CrdtMap.mergeInto(t, s),
    copy: CrdtMap.copy,
    equals: CrdtMap.equals,
    leq: CrdtMap.leq,
  } as Lattice<CrdtMap>,
] as Lattice<unknown>[];

const runs = { numRuns: 200 };

describe.each(lattices)("$name join is a semilattice", (L) => {
  it("is idempotent", () => {
    fc.assert(
      fc.property(L.arb, (a) => L.equals(L.join(a, a), a)),
      runs,
    );
  });
  it("is commutative", () => {
    fc.assert(
      fc.property(L.arb, L.arb, (a, b) => L.equals(L.join(a, b), L.join(b, a))),
      runs,
    );
  });
  it("is associative", () => {
    fc.assert(
      fc.property(L.arb, L.arb, L.arb, (a, b, c) =>
        L.equals(L.join(L.join(a, b), c), L.join(a, L.join(b, c))),
      ),
      runs,
    );
  });
  it("is an upper bound, and mergeInto equals join and reports change exactly", () => {
    fc.assert(
      fc.property(L.arb, L.arb, (a, b) => {
        const j = L.join(a, b);
        const t = L.copy(a);
        const changed = L.mergeInto(t, b);
        return L.leq(a, j) && L.leq(b, j) && L.equals(t, j) && changed === !L.equals(a, j);
      }),
      runs,
    );
  });
  it("join does not mutate its inputs", () => {
    fc.assert(
      fc.property(L.arb, L.arb, (a, b) => {
        const a0 = L.copy(a);
        const b0 = L.copy(b);
        L.join(a, b);
        return L.equals(a, a0) && L.equals(b, b0);
      }),
      runs,
    );
  });
});

describe("mutators", () => {
  it("G-Counter increment is inflationary and its delta join equals the full-state mutation", () => {
    fc.assert(
      fc.property(gcounterArb, replicaArb, amountArb, (s, r, a) => {
        const d = GCounter.increment(s, r, a);
        if (!d.ok) return false;
        const viaDelta = GCounter.join(s, d.value);
        const full = new Map(s).set(r, (s.get(r) ?? 0) + a);
        return (
          GCounter.leq(s, viaDelta) &&
          GCounter.equals(viaDelta, full) &&
          GCounter.value(viaDelta) >= GCounter.value(s)
        );
      }),
      runs,
    );
  });

  it("PN value is Σ increments − Σ decrements, whatever the interleaving with joins", () => {
    const op = fc.record({
      replica: replicaArb,
      amount: fc.integer({ min: 0, max: 1000 }),
      inc: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        let s = PNCounter.initial();
        let expected = 0;
        for (const o of ops) {
          const d = o.inc
            ? PNCounter.increment(s, o.replica, o.amount)
            : PNCounter.decrement(s, o.replica, o.amount);
          if (!d.ok) return false;
          const before = s;
          s = PNCounter.join(s, d.value);
          // Re-applying the same delta (a duplicate) changes nothing.
          s = PNCounter.join(s, d.value);
          if (!PNCounter.leq(before, s)) return false;
          expected += o.inc ? o.amount : -o.amount;
        }
        return PNCounter.value(s) === expected;
      }),
      runs,
    );
  });

  it("PN value with fractional amounts matches within float rounding", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(replicaArb, fc.double({ min: 0, max: 1000, noNaN: true }), fc.boolean())),
        (ops) => {
          let s = PNCounter.initial();
          let expected = 0;
          for (const [r, a, inc] of ops) {
            const d = inc ? PNCounter.increment(s, r, a) : PNCounter.decrement(s, r, a);
            if (!d.ok) return false;
            PNCounter.mergeInto(s, d.value);
            expected += inc ? a : -a;
          }
          s = PNCounter.join(s, s);
          return Math.abs(PNCounter.value(s) - expected) <= 1e-9 * Math.max(1, ops.length * 1000);
        },
      ),
      runs,
    );
  });

  it("record mutators are inflationary and delta-join equals the full-state mutation", () => {
    const mut = fc.oneof(
      fc.record({ t: fc.constant("consume" as const), r: replicaArb, a: amountArb }),
      fc.record({ t: fc.constant("refund" as const), r: replicaArb, a: amountArb }),
      fc.record({ t: fc.constant("deny" as const), r: replicaArb, a: amountArb }),
      fc.record({ t: fc.constant("loan" as const), l: loanArb }),
      fc.record({
        t: fc.constant("return" as const),
        lender: regionArb,
        borrower: regionArb,
        seq: fc.integer({ min: 0, max: 9 }),
      }),
    );
    fc.assert(
      fc.property(recordArb, mut, (s, m) => {
        let d: ReturnType<typeof KeyRecord.consume>;
        const full = KeyRecord.copy(s);
        switch (m.t) {
          case "consume":
            d = KeyRecord.consume(s, m.r, m.a);
            full.consumed.p.set(m.r, (s.consumed.p.get(m.r) ?? 0) + m.a);
            break;
          case "refund":
            d = KeyRecord.refund(s, m.r, m.a);
            full.consumed.n.set(m.r, (s.consumed.n.get(m.r) ?? 0) + m.a);
            break;
          case "deny":
            d = KeyRecord.deny(s, m.r, m.a);
            full.denied.set(m.r, (s.denied.get(m.r) ?? 0) + m.a);
            break;
          case "loan": {
            const cur = LoanRegister.get(s.loans, m.l.lender, m.l.borrower);
            const loan = { ...m.l, seq: (cur?.seq ?? -1) + 1 + m.l.seq };
            d = KeyRecord.grantLoan(s, loan);
            full.loans.set(`${loan.lender}>${loan.borrower}`, loan);
            break;
          }
          case "return": {
            d = KeyRecord.returnLoan(s, m);
            const k = `${m.lender}>${m.borrower}`;
            if ((s.returned.get(k)?.seq ?? -1) < m.seq) full.returned.set(k, m);
            break;
          }
        }
        if (!d.ok) return false;
        const viaDelta = KeyRecord.join(s, d.value);
        return KeyRecord.leq(s, viaDelta) && KeyRecord.equals(viaDelta, full);
      }),
      runs,
    );
  });

  it("keyed map: per-key delta join equals full-state join", () => {
    fc.assert(
      fc.property(mapArb, keyArb, replicaArb, amountArb, (s, key, r, a) => {
        const d = KeyRecord.consume(s.get(key) ?? KeyRecord.initial(), r, a);
        if (!d.ok) return false;
        const viaDelta = CrdtMap.copy(s);
        CrdtMap.mergeKeyInto(viaDelta, key, d.value);
        const fullRecord = KeyRecord.join(s.get(key) ?? KeyRecord.initial(), d.value);
        const full = CrdtMap.join(s, new Map([[key, fullRecord]]));
        return CrdtMap.equals(viaDelta, full) && CrdtMap.leq(s, viaDelta);
      }),
      runs,
    );
  });
});

describe("the change a merge reports (mergeKeyDelta)", () => {
  it("is the smallest δ: old ⊔ δ = new, δ ≤ what was merged, and every entry of δ moved old", () => {
    fc.assert(
      fc.property(mapArb, keyArb, recordArb, (s, key, src) => {
        const before = s.get(key) ?? KeyRecord.initial();
        const map = CrdtMap.copy(s);
        const delta = CrdtMap.mergeKeyDelta(map, key, src);
        const after = map.get(key) ?? KeyRecord.initial();
        if (delta === null) return KeyRecord.equals(after, before) && KeyRecord.leq(src, before);
        const strictlyNew = (m: ReadonlyMap<string, number>, old: ReadonlyMap<string, number>) =>
          [...m].every(([id, v]) => !(v <= (old.get(id) ?? Number.NEGATIVE_INFINITY)));
        return (
          KeyRecord.equals(KeyRecord.join(before, delta), after) &&
          KeyRecord.leq(delta, src) &&
          KeyRecord.equals(after, KeyRecord.join(before, src)) &&
          (s.get(key) === undefined ||
            (strictlyNew(delta.consumed.p, before.consumed.p) &&
              strictlyNew(delta.consumed.n, before.consumed.n) &&
              strictlyNew(delta.denied, before.denied) &&
              [...delta.loans].every(([k, l]) => after.loans.get(k) === l && before.loans.get(k) !== l) &&
              [...delta.returned].every(([k, m]) => m.seq > (before.returned.get(k)?.seq ?? -1))))
        );
      }),
      runs,
    );
  });
});

it("lattice suites are non-empty", () => {
  expect(lattices.length).toBe(6);
});
