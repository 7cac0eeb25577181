import { describe, expect, it } from "vitest";
import {
  decodeKey,
  encodeKey,
  GCounter,
  KeyRecord,
  type LoanConflict,
  LoanRegister,
  PNCounter,
  regionOfReplica,
  ReturnedRegister,
  replicaId,
} from "../src/index.js";

describe("counters", () => {
  it("reject negative, NaN and infinite amounts with a typed error and change nothing", () => {
    const s = new Map([["us.1", 5]]);
    for (const bad of [-1, -0.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const r = GCounter.increment(s, "us.1", bad);
      expect(r.ok).toBe(false);
      expect(!r.ok && r.error.code).toBe("GQ_ERR_INVALID_AMOUNT");
      const p = PNCounter.decrement({ p: new Map(), n: new Map() }, "us.1", bad);
      expect(!p.ok && p.error.code).toBe("GQ_ERR_INVALID_AMOUNT");
    }
    expect(GCounter.increment(s, "us.1", Number.MAX_VALUE).ok).toBe(true);
    expect(!GCounter.increment(new Map([["us.1", Number.MAX_VALUE]]), "us.1", Number.MAX_VALUE).ok).toBe(
      true,
    );
    expect(s).toEqual(new Map([["us.1", 5]]));
    const badId = GCounter.increment(s, "us|1", 1);
    expect(!badId.ok && badId.error.code).toBe("GQ_ERR_INVALID_ID");
  });

  it("accept fractional amounts and return only the changed entry as delta", () => {
    const s = new Map([
      ["us.1", 5],
      ["eu.1", 2],
    ]);
    const d = GCounter.increment(s, "us.1", 0.25);
    expect(d).toEqual({ ok: true, value: new Map([["us.1", 5.25]]) });
  });

  it("sum per region by the replica id's last dot, so dotted region ids are not confused", () => {
    const s = new Map([
      ["eu.1", 1],
      ["eu.2", 2],
      ["eu.west.1", 10],
      ["us.k9", 100],
    ]);
    expect(GCounter.regionTotal(s, "eu")).toBe(3);
    expect(GCounter.regionTotal(s, "eu.west")).toBe(10);
    expect(GCounter.regionTotals(s)).toEqual(
      new Map([
        ["eu", 3],
        ["eu.west", 10],
        ["us", 100],
      ]),
    );
    expect(GCounter.value(s)).toBe(113);
    const pn = { p: s, n: new Map([["eu.2", 1.5]]) };
    expect(PNCounter.regionTotal(pn, "eu")).toBe(1.5);
    expect(PNCounter.regionTotals(pn).get("eu")).toBe(1.5);
    expect(PNCounter.value(pn)).toBe(111.5);
    expect(regionOfReplica("eu.west.1")).toBe("eu.west");
  });

  it("build replica ids and keys with validation", () => {
    expect(replicaId("eu.west", "k1")).toEqual({ ok: true, value: "eu.west.k1" });
    expect(replicaId("eu", "k.1").ok).toBe(false);
    expect(replicaId("e u", "k1").ok).toBe(false);
    expect(encodeKey("acme", "api")).toEqual({ ok: true, value: "acme|api" });
    const bad = encodeKey("ac|me", "api");
    expect(!bad.ok && bad.error.code).toBe("GQ_ERR_INVALID_ID");
    expect(decodeKey("acme|api")).toEqual({ ok: true, value: { tenant: "acme", resource: "api" } });
    const badKey = decodeKey("acme");
    expect(!badKey.ok && badKey.error.code).toBe("GQ_ERR_INVALID_KEY");
  });
});

describe("loan register", () => {
  const loan = (units: number, deadlineUs: number, seq: number) => ({
    lender: "us",
    borrower: "eu",
    units,
    deadlineUs,
    seq,
  });

  it("keeps the higher seq", () => {
    const a = new Map([["us>eu", loan(100, 10, 1)]]);
    const b = new Map([["us>eu", loan(50, 20, 2)]]);
    expect(LoanRegister.join(a, b).get("us>eu")).toEqual(loan(50, 20, 2));
    expect(LoanRegister.join(b, a).get("us>eu")).toEqual(loan(50, 20, 2));
  });

  it("resolves equal-seq conflicts to the smaller (units, deadline) and reports them", () => {
    const a = new Map([["us>eu", loan(100, 10, 7)]]);
    const b = new Map([["us>eu", loan(100, 5, 7)]]);
    const c1: LoanConflict[] = [];
    const c2: LoanConflict[] = [];
    const j1 = LoanRegister.join(a, b, c1);
    const j2 = LoanRegister.join(b, a, c2);
    expect(j1.get("us>eu")).toEqual(loan(100, 5, 7));
    expect(j2.get("us>eu")).toEqual(loan(100, 5, 7));
    expect(c1).toEqual([
      { lender: "us", borrower: "eu", seq: 7, kept: loan(100, 5, 7), discarded: loan(100, 10, 7) },
    ]);
    expect(c2).toHaveLength(1);
    const same: LoanConflict[] = [];
    LoanRegister.join(a, a, same);
    expect(same).toEqual([]);
  });

  it("grant validates units, times and seq", () => {
    const s = new Map([["us>eu", loan(100, 10, 7)]]);
    const stale = LoanRegister.grant(s, loan(1, 1, 7));
    expect(!stale.ok && stale.error.code).toBe("GQ_ERR_STALE_SEQ");
    for (const bad of [
      loan(-1, 1, 9),
      loan(1.5, 1, 9),
      loan(1_000_001, 1, 9),
      loan(1, -1, 9),
      loan(1, 1, 2 ** 53),
    ]) {
      const r = LoanRegister.grant(s, bad);
      expect(!r.ok && r.error.code).toBe("GQ_ERR_INVALID_LOAN");
    }
    expect(LoanRegister.grant(s, loan(1_000_000, 99, 8))).toEqual({
      ok: true,
      value: new Map([["us>eu", loan(1_000_000, 99, 8)]]),
    });
  });

  it("returned register keeps the max seq and blocks used-again copies (trap 12)", () => {
    const d = ReturnedRegister.markReturned(new Map(), { lender: "us", borrower: "eu", seq: 7 });
    expect(d.ok).toBe(true);
    const s = d.ok ? d.value : new Map();
    const older = new Map([["us>eu", { lender: "us", borrower: "eu", seq: 3 }]]);
    const joined = ReturnedRegister.join(s, older);
    expect(joined.get("us>eu")?.seq).toBe(7);
    expect(ReturnedRegister.isReturned(joined, loan(1, 1, 7))).toBe(true);
    expect(ReturnedRegister.isReturned(joined, loan(1, 1, 6))).toBe(true);
    expect(ReturnedRegister.isReturned(joined, loan(1, 1, 8))).toBe(false);
  });

  it("record mutators return only the part they change", () => {
    const r = KeyRecord.initial();
    const d = KeyRecord.deny(r, "us.1", 2);
    expect(d.ok && d.value.denied.get("us.1")).toBe(2);
    expect(d.ok && KeyRecord.entryCount(d.value)).toBe(1);
    const g = KeyRecord.grantLoan(r, loan(5, 6, 7));
    expect(g.ok && KeyRecord.entryCount(g.value)).toBe(1);
    expect(KeyRecord.isEmpty(r)).toBe(true);
  });
});
