// The scripts' typed arguments (args.ts, script-args.ts) against their headers (specs.ts):
// check.lua's head, which the store joins once per policy, has the script's KEYS and every ARGV but
// the cost, in the header's order, and a bad cost is named; the policy is the name of its shard's
// entry (the scripts take no policy arguments); every other script's builder builds
// its KEYS and ARGV in the header's count, the variadic tails as the scripts read them.
import type { KeyPolicy } from "@geoquota/core";
import { describe, expect, it } from "vitest";
import {
  assignReserveArgs,
  assignUsageArgs,
  checkCompoundArgs,
  checkCost,
  checkHead,
  drainDirtyArgs,
  keyArgsBuilder,
  keyHeadArgs,
  leaseAcquireArgs,
  leaseReleaseArgs,
  loanGrantArgs,
  loanMergeArgs,
  loanReturnArgs,
  loanReturnReceivedArgs,
  policyKey,
  policyVersionOf,
  RedisStoreError,
  refundArgs,
  regionInitArgs,
  SCRIPTS,
  type ScriptCall,
  shardOf,
  type TypedScriptName,
} from "../src/index.js";

const policy: KeyPolicy = {
  tenant: "acme",
  resource: "api",
  limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 10 },
  baseShare: 500_000,
  floorShare: 100_000,
};

describe("check.lua's typed arguments", () => {
  it("the head is the spec's KEYS and the region: one short of the cost", () => {
    const a = keyArgsBuilder({ epsilonUs: 5_000, loanDurationUs: 80_000 })(policy);
    const head = checkHead(a, "eu");
    expect(head.length).toBe(SCRIPTS.check.keys.length + SCRIPTS.check.argv.length - 1);
    expect(head.slice(0, SCRIPTS.check.keys.length)).toEqual(a.keys);
    expect(head[SCRIPTS.check.keys.length]).toBe("eu");
    expect(a.keys[2]).toMatch(/:acme:api:b$/);
  });

  it("the policy travels in the name of its shard's entry (lua/lib/core.lua read_policy parses it)", () => {
    const a = keyArgsBuilder({ epsilonUs: 5_000, loanDurationUs: 80_000 })(policy);
    const shard = shardOf("acme");
    // fingerprint | window µs | ε | D | ttl (C/r + ⌈D + 3ε⌉ + 1 s = 10,000 + 95 + 1,000 ms)
    expect(a.keys[3]).toBe(`gq:{s${shard}}:pv:token_bucket:100:10:0:500000:100000|1000000|5000|80000|11095`);
    expect(a.keys[3]).toBe(
      policyKey(shard, policyVersionOf(policy, { epsilonUs: 5_000, loanDurationUs: 80_000 })),
    );
    expect(a.ttlMs).toBe(11_095);
  });

  it("the cost is Lua's text of a finite number ≥ 0, else GQ_ERR_BAD_ARGUMENT naming it", () => {
    expect(checkCost(2.5)).toBe("2.5");
    expect(checkCost(0)).toBe("0");
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => checkCost(bad)).toThrow(RedisStoreError);
      expect(() => checkCost(bad)).toThrow(`cost ${bad}`);
    }
  });
});

const a = keyArgsBuilder({ epsilonUs: 5_000, loanDurationUs: 80_000 })(policy);

/** A fixed-arity call: the header's KEYS and ARGV counts exactly, the region first. */
function expectFixed(
  name: TypedScriptName,
  call: ScriptCall<readonly string[], readonly (string | number)[]>,
) {
  expect(call.keys.length, `${name} KEYS`).toBe(SCRIPTS[name].keys.length);
  expect(call.argv.length, `${name} ARGV`).toBe(SCRIPTS[name].argv.length);
}

describe("typed script arguments", () => {
  it("the fixed-arity per-key scripts: the header's counts, the region first", () => {
    const receipt = { id: "r1", admittedUs: 1, expiresUs: 2 };
    const calls = {
      refund: refundArgs(a, "eu", 1.5, receipt),
      leaseRelease: leaseReleaseArgs(a, "eu", "l1", 0.5),
      assignReserve: assignReserveArgs(a, "eu", "q1", 25, 2.5, 1_000_000, 20_000, "q0"),
      assignUsage: assignUsageArgs(a, "eu", 7, 2),
      loanGrant: loanGrantArgs(a, "eu", "us", 10, 80_000),
      loanReturn: loanReturnArgs(a, "eu", "us"),
      loanReturnReceived: loanReturnReceivedArgs(a, "eu", "us", 3),
      inspect: keyHeadArgs(a, "eu"),
      reset: keyHeadArgs(a, "eu"),
    } as const;
    for (const [name, call] of Object.entries(calls)) {
      expectFixed(name as TypedScriptName, call);
      expect(call.argv[0]).toBe("eu");
      expect(call.keys).toEqual(a.keys);
    }
    expect(calls.refund.argv.slice(-4)).toEqual(["1.5", "r1", 1, 2]);
    expect(calls.leaseRelease.argv.slice(-2)).toEqual(["l1", "0.5"]);
    expect(calls.assignReserve.argv.slice(-6)).toEqual(["q1", 25, "2.5", 1_000_000, 20_000, "q0"]);
    // No supersede: the empty id (a fresh assignment).
    expect(assignReserveArgs(a, "eu", "q1", 25, 2.5, 1_000_000, 20_000).argv.at(-1)).toBe("");
    expect(calls.assignUsage.argv.slice(-2)).toEqual(["7", "2"]);
  });

  it("the shard scripts: drain_dirty's feeds and region_init's two keys", () => {
    const d = drainDirtyArgs(["d0", "g0", "d1", "g1"], 50, 1);
    expect(d.argv).toEqual([50, 1]);
    expect(d.keys.length % (SCRIPTS.drainDirty.itemKeys?.length ?? 0)).toBe(0);
    expectFixed("regionInit", regionInitArgs("inc", "rid", "init", "abc", ""));
  });

  it("lease_acquire: the fixed ARGV, then the count and each release's id and used", () => {
    const call = leaseAcquireArgs(a, "eu", "l2", 5, 40_000, [
      { leaseId: "l0", used: 1 },
      { leaseId: "l1", used: 2.5 },
    ]);
    const fixed = SCRIPTS.leaseAcquire.argv.length;
    expect(call.argv.length).toBe(fixed + 4);
    expect(call.argv.slice(fixed - 4)).toEqual(["l2", 5, 40_000, 2, "l0", "1", "l1", "2.5"]);
  });

  it("loan_merge: the loans after their count, then the counter fields after theirs", () => {
    const call = loanMergeArgs(a, "eu", [{ lender: "us", units: 3, deadlineUs: 9, seq: 2 }], [["p|us", 4]]);
    const fixed = SCRIPTS.loanMerge.argv.length;
    expect(call.argv.slice(fixed - 1)).toEqual([1, "us", 3, 9, 2, 1, "p|us", "4"]);
  });

  it("check_compound: each item's keys with its cost; needs after all items, only when given", () => {
    const plain = checkCompoundArgs("eu", [
      { args: a, cost: 1 },
      { args: a, cost: 2 },
    ]);
    expect(plain.keys.length).toBe(2 * SCRIPTS.checkCompound.itemKeys.length);
    expect(plain.argv.length).toBe(2 + 2 * SCRIPTS.checkCompound.itemArgv.length);
    expect(plain.argv.slice(0, 2)).toEqual(["eu", 2]);
    const needs = checkCompoundArgs("eu", [
      { args: a, cost: 1, need: 0 },
      { args: a, cost: 2 },
    ]);
    expect(needs.argv.slice(plain.argv.length)).toEqual(["0", "2"]);
  });
});
