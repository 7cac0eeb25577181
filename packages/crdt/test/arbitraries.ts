// fast-check arbitraries over small id pools, so generated states overlap
// (the interesting case for a join).
import fc from "fast-check";
import {
  type CrdtMap,
  type GCounter,
  KeyRecord,
  type Loan,
  type PNCounter,
  pairKey,
  type ReturnedMark,
} from "../src/index.js";

export const replicaArb = fc.constantFrom("us.1", "us.2", "eu.west.1", "eu.1", "ap-south.x");
export const regionArb = fc.constantFrom("us", "eu", "eu.west", "ap-south");
export const keyArb = fc.constantFrom("t1|r1", "t1|r2", "t2|r1", "acme|api.search");
export const amountArb = fc.oneof(
  fc.integer({ min: 0, max: 1_000_000 }),
  fc.double({ min: 0, max: 1e9, noNaN: true }),
);

export const gcounterArb: fc.Arbitrary<GCounter> = fc
  .array(fc.tuple(replicaArb, amountArb), { maxLength: 6 })
  .map((xs) => {
    const m: GCounter = new Map();
    for (const [r, v] of xs) m.set(r, Math.max(v, m.get(r) ?? 0));
    return m;
  });

export const pnArb: fc.Arbitrary<PNCounter> = fc.record({ p: gcounterArb, n: gcounterArb });

export const loanArb: fc.Arbitrary<Loan> = fc.record({
  lender: regionArb,
  borrower: regionArb,
  // Tiny ranges so equal-seq conflicts actually occur.
  units: fc.integer({ min: 0, max: 3 }).map((u) => u * 250_000),
  deadlineUs: fc.integer({ min: 0, max: 3 }),
  seq: fc.integer({ min: 0, max: 4 }),
});

export const loansArb = fc.array(loanArb, { maxLength: 5 }).map((xs) => {
  const m = new Map<string, Loan>();
  // Build through join so the generated state is a reachable lattice value.
  for (const l of xs) {
    const k = pairKey(l.lender, l.borrower);
    const cur = m.get(k);
    if (
      cur === undefined ||
      l.seq > cur.seq ||
      (l.seq === cur.seq && (l.units < cur.units || (l.units === cur.units && l.deadlineUs < cur.deadlineUs)))
    ) {
      m.set(k, l);
    }
  }
  return m;
});

export const returnedArb = fc
  .array(fc.record({ lender: regionArb, borrower: regionArb, seq: fc.integer({ min: 0, max: 6 }) }), {
    maxLength: 4,
  })
  .map((xs) => {
    const m = new Map<string, ReturnedMark>();
    for (const x of xs) {
      const k = pairKey(x.lender, x.borrower);
      if ((m.get(k)?.seq ?? -1) < x.seq) m.set(k, x);
    }
    return m;
  });

export const recordArb: fc.Arbitrary<KeyRecord> = fc.record({
  consumed: pnArb,
  denied: gcounterArb,
  loans: loansArb,
  returned: returnedArb,
});

export const mapArb: fc.Arbitrary<CrdtMap> = fc
  .array(fc.tuple(keyArb, recordArb), { maxLength: 4 })
  .map((xs) => {
    const m: CrdtMap = new Map();
    for (const [k, r] of xs) {
      const cur = m.get(k);
      if (cur === undefined) m.set(k, r);
      else KeyRecord.mergeInto(cur, r);
    }
    return m;
  });
