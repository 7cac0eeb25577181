// Each script's reply is decoded in one place (src/replies.ts) into a named
// interface, from the layout of its `-- Returns:` line; a reply of another
// shape is GQ_ERR_SCRIPT_REPLY naming the field, never a silent NaN or a
// shifted field. (Against real Redis, every decoder runs in
// packages/redis/test/lua-differential.int.test.ts, field by field against
// the model.)
import { describe, expect, it } from "vitest";
import { RedisStoreError } from "../src/errors.js";
import { DECODERS } from "../src/replies.js";

describe("script replies", () => {
  it("check and refund: the decision fields by name, resetUs after nowUs", () => {
    const reply = [1, "2.5", 500_000, 3, 0, 1_700_000_000_000_000, 250];
    expect(DECODERS.check(reply)).toEqual({
      allowed: true,
      remaining: 2.5,
      share: 500_000,
      leased: 3,
      recovering: false,
      resetUs: 250,
      nowUs: 1_700_000_000_000_000,
    });
    expect(DECODERS.refund([-2, 0, 0, 0, 0, 42, 0])).toMatchObject({ status: -2, nowUs: 42 });
  });

  it("check_compound: one decision per item, each six values after the three leading ones", () => {
    const r = DECODERS.checkCompound([0, 1, 9, 1, "4", 10, 0, 0, 0, 0, "-1", 20, 2, 1, 7]);
    expect(r).toMatchObject({ allowed: false, failedIndex: 1, nowUs: 9 });
    expect(r.parts).toEqual([
      { allowed: true, remaining: 4, share: 10, leased: 0, recovering: false, resetUs: 0 },
      { allowed: false, remaining: -1, share: 20, leased: 2, recovering: true, resetUs: 7 },
    ]);
    expect(() => DECODERS.checkCompound([1, -1, 9, 1, 2])).toThrow(
      /GQ_ERR_SCRIPT_REPLY: .*checkCompound: 5 values/,
    );
  });

  it("loan_grant: a grant or a refusal with its reason; an unknown reason is refused", () => {
    expect(DECODERS.loanGrant([1, "", 1000, 77, 3, 5])).toEqual({
      ok: true,
      units: 1000,
      deadlineUs: 77,
      seq: 3,
      nowUs: 5,
    });
    expect(DECODERS.loanGrant([0, "floor", 0, 0, 0, 5])).toEqual({ ok: false, reason: "floor", nowUs: 5 });
    expect(() => DECODERS.loanGrant([0, "sunny", 0, 0, 0, 5])).toThrow(/loanGrant reason sunny/);
  });

  it("lease_acquire: the returned amounts after the three leading values", () => {
    expect(DECODERS.leaseAcquire([5, 100, 50, "1.5", "0"])).toEqual({
      granted: 5,
      expiryUs: 100,
      nowUs: 50,
      returned: [1.5, 0],
    });
  });

  it("drain_dirty, region_init, inspect: lists, strings and flags", () => {
    expect(DECODERS.drainDirty([8, ["t|r", Buffer.from("u|s")]])).toEqual({
      nowUs: 8,
      members: ["t|r", "u|s"],
    });
    expect(DECODERS.regionInit(["ab:0", 8, 1])).toEqual({ marker: "ab:0", nowUs: 8, changed: true });
    const v = DECODERS.inspect([8, "ab:0", 0, 10, "1", "2", "3", 1, 0, ["p|x.1", "4"], [], ["L1", "2:99"]]);
    expect(v).toMatchObject({ nowUs: 8, marker: "ab:0", remaining: 1, capacity: 2, ratePerSecond: 3 });
    expect(v.counters).toEqual([["p|x.1", "4"]]);
    expect(v.leases).toEqual([["L1", "2:99"]]);
  });

  it("a missing or non-numeric field is GQ_ERR_SCRIPT_REPLY naming the field", () => {
    const bad = () => DECODERS.check([1, "x", 500_000, 0, 0, 1, 0]);
    expect(bad).toThrow(RedisStoreError);
    expect(bad).toThrow(/GQ_ERR_SCRIPT_REPLY: .*remaining: x/);
    expect(() => DECODERS.leaseRelease([3])).toThrow(/now: undefined/);
  });
});
