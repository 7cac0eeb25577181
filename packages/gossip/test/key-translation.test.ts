// The one translation between a key's Redis view and the CRDT record
// (daemon/key-translation.ts): the counters and the loans addressed here
// survive a round trip view → record → merge arguments, and the derived
// daemon view (reserved, current, inUse, lease pin) follows the deadlines.
import { counterSetsOf } from "@geoquota/redis";
import { describe, expect, it } from "vitest";
import { keyStateOf, mergeOf, type RedisKeyView } from "../src/daemon/key-translation.js";

const EPS = 250_000;
const NOW = 10_000_000;

function view(): RedisKeyView {
  return {
    nowUs: NOW,
    recovering: false,
    counters: counterSetsOf([
      ["p|us.1", 7],
      ["n|us.1", 2],
      ["d|eu.3", 4],
      ["p|eu.3", 11],
    ]),
    granted: [
      { lender: "us", borrower: "eu", units: 5000, deadlineUs: NOW + 1_000_000, seq: 3 },
      { lender: "us", borrower: "ap", units: 900, deadlineUs: NOW - EPS - 1, seq: 1 },
    ],
    returned: { eu: 2 },
    loansOut: [
      { lender: "us", borrower: "eu", units: 4000, deadlineUs: NOW + 10, seq: 2 },
      { lender: "us", borrower: "eu", units: 5000, deadlineUs: NOW + 1_000_000, seq: 3 },
    ],
    loansIn: [
      { lender: "eu", borrower: "us", units: 300, deadlineUs: NOW + 500_000, seq: 2 },
      { lender: "ap", borrower: "us", units: 800, deadlineUs: NOW + 500_000, seq: 4 },
    ],
    leases: { a: { tokens: 3, expiryUs: NOW + 1 }, b: { tokens: 9, expiryUs: NOW } },
  };
}

describe("key translation (Redis view ↔ CRDT record)", () => {
  it("round trip: counters and the grants come back as the merge's fields and loans", () => {
    const state = keyStateOf("us", EPS, 50, view());
    const m = mergeOf("eu", state.record);
    expect(counterSetsOf(Object.entries(m.counterFields))).toEqual(view().counters);
    expect(m.counterFields).toEqual({ "p|us.1": 7, "p|eu.3": 11, "n|us.1": 2, "d|eu.3": 4 });
    // Only the loans addressed to the merging region.
    expect(m.loans).toEqual([
      { lender: "us", borrower: "eu", units: 5000, deadlineUs: NOW + 1_000_000, seq: 3 },
    ]);
    expect(mergeOf("us", state.record).loans).toEqual([]);
    expect([...state.record.returned.values()]).toEqual([{ lender: "eu", borrower: "us", seq: 2 }]);
  });

  it("the daemon's view: outstanding grants, the largest reservation, usable inbound loans, the lease pin", () => {
    const state = keyStateOf("us", EPS, 50, view());
    expect(state.current).toEqual({ eu: 5000 }); // ap's grant is past deadline + ε
    expect(state.reserved).toEqual({ eu: 5000 });
    // eu's loan seq 2 was returned (r|eu = 2): not usable.
    expect(state.inUse).toEqual([{ lender: "ap", units: 800, seq: 4 }]);
    // Lease a (3 tokens) is unexpired, b expires now: ceil(1e6 · 3 / 50).
    expect(state.leasePinnedPpm).toBe(60_000);
    expect(state.nowUs).toBe(NOW);
    expect(keyStateOf("us", EPS, 0, view()).leasePinnedPpm).toBe(0);
  });

  it("a live RLQS assignment pins the share it holds beside its tokens; an expired one nothing", () => {
    const v = view();
    const leases = {
      ...v.leases,
      "q|s.1": { tokens: 2, expiryUs: NOW + 5, shareUnits: 100_000 },
      "q|s.0": { tokens: 1, expiryUs: NOW, shareUnits: 300_000 },
    };
    // ceil(1e6 · (3 + 2) / 50) + 100,000.
    expect(keyStateOf("us", EPS, 50, { ...v, leases }).leasePinnedPpm).toBe(100_000 + 100_000);
    // Never more than the whole share.
    const big = { "q|s.2": { tokens: 0, expiryUs: NOW + 5, shareUnits: 1_000_000 }, ...leases };
    expect(keyStateOf("us", EPS, 50, { ...v, leases: big }).leasePinnedPpm).toBe(1_000_000);
  });
});
