// The operator features of the policies file (issue 15 item 3): shadow, allow and deny
// lists, per-key overrides; and resolveKey, the meet of the policy versions a region
// respects during a rollout.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  accessOf,
  ConfigError,
  globMatch,
  lookupPolicy,
  type PolicySet,
  parsePolicies,
  resolveEffective,
  resolveKey,
  resolvePolicy,
  withPolicy,
} from "../src/index.js";

const ids = ["us-east", "eu-west", "ap-south"];
const DEFAULT = { capacity: 5, refillPerSecond: 1 };

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

const parse = (extra: Record<string, unknown>) =>
  parsePolicies({ default: DEFAULT, ...extra }, "p.json", ids);
const issuesOf = (extra: Record<string, unknown>) => errorOf(() => parse(extra)).issues;

describe("policy names: any key the check API takes", () => {
  const email = "user:123@example.com";
  const long = `${"é@".repeat(63)}ab`; // 128 characters, stored hashed

  it("a policy and an exact override may name keys outside [A-Za-z0-9_.-], up to 128 characters", () => {
    const set = parse({
      policies: [
        { tenant: email, resource: "api", capacity: 9, refillPerSecond: 1 },
        { tenant: "*", resource: "a b/c", capacity: 8, refillPerSecond: 1 },
        { tenant: long, resource: "api", capacity: 7, refillPerSecond: 1 },
        { tenant: "ip4-203.0.113.0-24", resource: "api", capacity: 6, refillPerSecond: 1 },
      ],
      overrides: [{ tenant: email, resource: "a b/c", capacity: 3 }],
    });
    expect(lookupPolicy(set, email, "api").capacity).toBe(9);
    expect(lookupPolicy(set, "anyone", "a b/c").capacity).toBe(8);
    expect(lookupPolicy(set, email, "a b/c").capacity).toBe(3);
    expect(lookupPolicy(set, long, "api").capacity).toBe(7);
    expect(lookupPolicy(set, "ip4-203.0.113.0-24", "api").capacity).toBe(6);
  });

  it("refuses names with |, empty or longer than 128 characters, naming the field", () => {
    const issues = issuesOf({
      policies: [
        { tenant: "a|b", resource: "r", capacity: 1, refillPerSecond: 1 },
        { tenant: "t", resource: "", capacity: 1, refillPerSecond: 1 },
        { tenant: `${long}x`, resource: "r", capacity: 1, refillPerSecond: 1 },
      ],
      overrides: [
        { tenant: "t", resource: "x|y", capacity: 1 },
        { tenant: "t", capacity: 1 },
      ],
    });
    expect(issues).toEqual([
      'policies[0].tenant: expected a key name: 1-128 characters, any but "|"',
      'policies[1].resource: expected a key name: 1-128 characters, any but "|"',
      'policies[2].tenant: expected a key name: 1-128 characters, any but "|"',
      'overrides[0].resource: expected a key name: 1-128 characters, any but "|"',
      'overrides[1]: expected "tenant" and "resource", or "key" (a glob), not both',
    ]);
  });

  it("a lookup by stored names (the daemon's) finds the policy named by the raw name", () => {
    const set = parse({
      policies: [
        { tenant: email, resource: "api", capacity: 9, refillPerSecond: 1 },
        { tenant: "*", resource: "a:b", capacity: 8, refillPerSecond: 1 },
      ],
      overrides: [{ tenant: email, resource: "x", capacity: 4 }],
    });
    const hashPart = (p: string) => (/^[A-Za-z0-9_.-]+$/.test(p) ? p : `h-${p.length}`);
    const names = { hashPart };
    expect(lookupPolicy(set, hashPart(email), "api", names).capacity).toBe(9);
    expect(lookupPolicy(set, "whoever", hashPart("a:b"), names).capacity).toBe(8);
    expect(lookupPolicy(set, hashPart(email), "x", names).capacity).toBe(4);
    // Without the hasher the stored name is just another tenant: the default.
    expect(lookupPolicy(set, hashPart(email), "api").capacity).toBe(5);
    const ok = resolveEffective([set], ids, "us-east", hashPart(email), "api", { names });
    expect(ok.limit.capacity).toBe(9);
  });
});

describe("wildcard overrides", () => {
  const set = parse({
    policies: [
      { tenant: "acme-1", resource: "api", capacity: 100, refillPerSecond: 10 },
      { tenant: "*", resource: "win", algorithm: "fixed_window", capacity: 10, windowMs: 1000 },
    ],
    overrides: [
      { key: "*/api", capacity: 20 },
      { key: "acme-*/api", capacity: 30 },
      { key: "acme-*/a*", capacity: 40 },
      { key: "acme-1*/*", capacity: 50 },
      { key: "b*/*", capacity: 61 },
      { key: "*b/*", capacity: 62 },
      { tenant: "acme-2", resource: "api", capacity: 70 },
      { key: "*/win", capacity: 15 },
    ],
  });

  it("exact beats wildcard; the most specific wildcard wins; ties by the key string", () => {
    expect(lookupPolicy(set, "acme-2", "api").capacity).toBe(70); // exact override
    // acme-*/api (8 literals) beats acme-1*/* (6), acme-*/a* (6) and */api (3).
    expect(lookupPolicy(set, "acme-1", "api").capacity).toBe(30);
    // acme-1*/* and acme-*/a*: 6 literals and 2 stars each; "acme-*/a*" < "acme-1*/*".
    expect(lookupPolicy(set, "acme-1", "apex").capacity).toBe(40);
    expect(lookupPolicy(set, "acme-1", "zzz").capacity).toBe(50);
    expect(lookupPolicy(set, "zed", "api").capacity).toBe(20);
    expect(lookupPolicy(set, "bob", "x").capacity).toBe(62); // "*b/*" < "b*/*" (same literals and stars)
    expect(lookupPolicy(set, "zed", "other").capacity).toBe(5); // no match: the default
    // Fields not given are inherited from what the key resolves to (the entry, then */r, the default).
    expect(lookupPolicy(set, "acme-1", "api").refillPerSecond).toBe(10);
    expect(lookupPolicy(set, "zed", "api").refillPerSecond).toBe(1);
    expect(lookupPolicy(set, "zed", "win")).toMatchObject({ algorithm: "fixed_window", capacity: 15 });
  });

  it("the precedence does not depend on the order of the file", () => {
    const raw = [
      { key: "*/api", capacity: 20 },
      { key: "acme-*/api", capacity: 30 },
      { key: "acme-*/a*", capacity: 40 },
      { key: "acme-1*/*", capacity: 50 },
    ];
    fc.assert(
      fc.property(fc.shuffledSubarray(raw, { minLength: raw.length }), (order) => {
        const s = parse({ overrides: order });
        return (
          lookupPolicy(s, "acme-1", "api").capacity === 30 &&
          lookupPolicy(s, "acme-1", "apex").capacity === 40 &&
          lookupPolicy(s, "acme-1", "zzz").capacity === 50
        );
      }),
      { numRuns: 30 },
    );
  });

  it("wildcards match the stored names: a hashed name is matched by its hash, as the daemon sees it", () => {
    const s = parse({
      overrides: [
        { key: "user*/api", capacity: 2 },
        { key: "*/api", capacity: 3 },
      ],
    });
    const raw = "user:1@example.com";
    // Its stored name is a hash: user*/api does not match it; */api does.
    expect(
      lookupPolicy(s, raw, "api", { stored: { tenant: "h-0123456789abcdef", resource: "api" } }).capacity,
    ).toBe(3);
    expect(lookupPolicy(s, "h-0123456789abcdef", "api").capacity).toBe(3);
    expect(lookupPolicy(s, "user_1", "api").capacity).toBe(2);
  });

  it("the meet over versions applies wildcard overrides per version", () => {
    const older = parse({ overrides: [{ key: "acme-*/api", capacity: 4 }] });
    const newer = parse({ overrides: [{ key: "acme-*/api", capacity: 9, refillPerSecond: 0.5 }] });
    const r = resolveKey([older, newer], ids, "us-east", "acme-3", "api");
    expect(r.policy.limit).toMatchObject({ capacity: 4, refillPerSecond: 0.5 });
    expect(resolveKey([newer], ids, "us-east", "acme-3", "api").policy.limit.capacity).toBe(9);
    expect(resolveKey([older, newer], ids, "us-east", "other", "api").policy.limit.capacity).toBe(5);
  });

  it("refuses a bad glob, a duplicate, both forms at once, and one that makes an invalid policy", () => {
    const issues = issuesOf({
      policies: [{ tenant: "*", resource: "w", algorithm: "fixed_window", capacity: 10, windowMs: 1000 }],
      overrides: [
        { key: "a:b/*", capacity: 1 },
        { key: "a*/r", capacity: 1 },
        { key: "a*/r", capacity: 2 },
        { key: "a*/x", tenant: "a", resource: "x", capacity: 1 },
        { key: "*/w", refillPerSecond: 3 },
        { key: "z*/q" },
      ],
    });
    expect(issues).toEqual([
      expect.stringMatching(/^overrides\[0\]\.key: expected "<tenant glob>\/<resource glob>"/),
      'overrides[3]: expected "tenant" and "resource", or "key" (a glob), not both',
    ]);
    expect(
      issuesOf({
        policies: [{ tenant: "*", resource: "w", algorithm: "fixed_window", capacity: 10, windowMs: 1000 }],
        overrides: [
          { key: "a*/r", capacity: 1 },
          { key: "a*/r", capacity: 2 },
          { key: "*/w", refillPerSecond: 3 },
          { key: "z*/q" },
        ],
      }),
    ).toEqual([
      "overrides[1]: duplicate override for a*/r (first at overrides[0])",
      "overrides[3]: expected at least one policy field to override",
      "overrides[2].refillPerSecond: fixed_window admits capacity per windowMs; its refill is derived (capacity / windowMs) (with the policies entry */w it overrides)",
    ]);
  });
});

describe("policies file: shadow, lists, overrides", () => {
  it("reads shadow on the default and on a policy", () => {
    const set = parse({
      default: { ...DEFAULT, shadow: true },
      policies: [{ tenant: "t", resource: "r", capacity: 9, refillPerSecond: 1, shadow: false }],
    });
    expect(lookupPolicy(set, "x", "y").shadow).toBe(true);
    expect(lookupPolicy(set, "t", "r").shadow).toBe(false);
    expect(issuesOf({ default: { ...DEFAULT, shadow: "yes" } })).toEqual([
      "default.shadow: expected true or false",
    ]);
  });

  it("allow and deny lists: tenants and key globs; deny wins over allow", () => {
    const set = parse({
      allow: [{ tenant: "vip" }, { key: "*/health" }, { key: "bot_*/pub*" }, { key: "acme/exact" }],
      deny: [{ tenant: "abuser" }, { key: "vip/admin_*" }],
    });
    expect(accessOf(set, "vip", "payments")).toBe("allow");
    expect(accessOf(set, "vip", "admin_delete")).toBe("deny");
    expect(accessOf(set, "anyone", "health")).toBe("allow");
    expect(accessOf(set, "anyone", "healthz")).toBe("limit");
    expect(accessOf(set, "bot_7", "public")).toBe("allow");
    expect(accessOf(set, "bot_7", "private")).toBe("limit");
    expect(accessOf(set, "acme", "exact")).toBe("allow");
    expect(accessOf(set, "acme", "exact2")).toBe("limit");
    expect(accessOf(set, "abuser", "health")).toBe("deny");
    // Names as given: a tenant with other characters is matched by a glob, never split at its "/".
    expect(accessOf(set, "a/b", "health")).toBe("allow");
  });

  it("validates list entries and names the field", () => {
    expect(
      issuesOf({
        deny: [
          { tenant: "a", key: "a/b" },
          {},
          { key: "a/b/c" },
          { key: "ab" },
          { key: "a b/c" },
          { tenant: "x:y" },
          { tenant: "ok", extra: 1 },
        ],
      }),
    ).toEqual([
      'deny[0]: expected exactly one of "tenant" or "key"',
      'deny[1]: expected exactly one of "tenant" or "key"',
      expect.stringMatching(/^deny\[2\]\.key: expected "<tenant glob>\/<resource glob>"/),
      expect.stringMatching(/^deny\[3\]\.key: expected .*exactly one \//),
      expect.stringMatching(/^deny\[4\]\.key: expected .*\[A-Za-z0-9_\.-\] and \*/),
      "deny[5].tenant: expected 1-128 characters of [A-Za-z0-9_.-]",
      expect.stringMatching(/^deny\[6\]: .*extra/),
    ]);
    expect(issuesOf({ allow: [{ tenant: "a" }, { key: "x*/y" }, { tenant: "a" }] })).toEqual([
      "allow[2]: duplicate entry (tenant a, first at allow[0])",
    ]);
  });

  it("an override replaces only its fields of what the lookup resolves (exact, then *, then default)", () => {
    const set = parse({
      policies: [
        { tenant: "t", resource: "r", capacity: 100, refill: { tokens: 60, perSeconds: 60 }, floorPpm: 1000 },
        { tenant: "*", resource: "w", algorithm: "fixed_window", capacity: 10, windowMs: 1000 },
      ],
      overrides: [
        { tenant: "t", resource: "r", capacity: 7 },
        { tenant: "u", resource: "w", capacity: 50 },
        { tenant: "v", resource: "other", refillPerSecond: 9, shadow: true },
      ],
    });
    // Exact entry: capacity replaced; refill and floor inherited.
    expect(lookupPolicy(set, "t", "r")).toEqual({
      algorithm: "token_bucket",
      capacity: 7,
      refillPerSecond: 1,
      floorPpm: 1000,
    });
    // (*, w) is a window: the derived refill follows the overridden capacity (50 per second).
    expect(lookupPolicy(set, "u", "w")).toEqual({
      algorithm: "fixed_window",
      capacity: 50,
      refillPerSecond: 50,
      windowMs: 1000,
    });
    expect(lookupPolicy(set, "x", "w").capacity).toBe(10);
    // The default: capacity inherited.
    expect(lookupPolicy(set, "v", "other")).toEqual({
      algorithm: "token_bucket",
      capacity: 5,
      refillPerSecond: 9,
      shadow: true,
    });
    expect(resolvePolicy(set, ids, "us-east", "t", "r", {}).limit.capacity).toBe(7);
    // An algorithm change drops the fields the new algorithm does not take, and needs its own.
    const sw = parse({
      overrides: [{ tenant: "t", resource: "r", algorithm: "sliding_window", windowMs: 2000 }],
    });
    expect(lookupPolicy(sw, "t", "r")).toEqual({
      algorithm: "sliding_window",
      capacity: 5,
      refillPerSecond: 2.5,
      windowMs: 2000,
    });
  });

  it("an override that makes an invalid policy, a duplicate or an empty one is refused, naming the field", () => {
    const issues = issuesOf({
      policies: [{ tenant: "*", resource: "w", algorithm: "fixed_window", capacity: 10, windowMs: 1000 }],
      overrides: [
        { tenant: "a", resource: "r", capacity: 2 },
        { tenant: "b", resource: "r", algorithm: "gcra" },
        { tenant: "c", resource: "r", capacity: -3 },
        { tenant: "d", resource: "w", refillPerSecond: 3 },
        { tenant: "a", resource: "r", capacity: 4 },
        { tenant: "e", resource: "r" },
        { tenant: "f", resource: "r", algorithm: "fixed_window" },
        { tenant: "g", resource: "r", weights: { mars: 1 } },
        { tenant: "*", resource: "r", capacity: 1 },
      ],
    });
    expect(issues).toEqual([
      "overrides[2].capacity: expected a finite number > 0",
      'overrides[8].tenant: expected a tenant name; for every tenant use key "*/<resource>"',
    ]);
    const merged = issuesOf({
      policies: [{ tenant: "*", resource: "w", algorithm: "fixed_window", capacity: 10, windowMs: 1000 }],
      overrides: [
        { tenant: "a", resource: "r", capacity: 2 },
        { tenant: "d", resource: "w", refillPerSecond: 3 },
        { tenant: "a", resource: "r", capacity: 4 },
        { tenant: "e", resource: "r" },
        { tenant: "f", resource: "r", algorithm: "fixed_window" },
        { tenant: "g", resource: "r", weights: { mars: 1 } },
      ],
    });
    expect(merged).toEqual([
      "overrides[2]: duplicate override for a/r (first at overrides[0])",
      "overrides[3]: expected at least one policy field to override",
      "overrides[1].refillPerSecond: fixed_window admits capacity per windowMs; its refill is derived (capacity / windowMs) (with the policies entry */w it overrides)",
      "overrides[4].windowMs: expected windowMs for fixed_window (with the default it overrides)",
      "overrides[5].weights.mars: unknown region (configured: us-east, eu-west, ap-south) (with the default it overrides)",
      "overrides[5].weights: expected a weight > 0 for at least one configured region (with the default it overrides)",
    ]);
    // A bad file is refused whole: the message names the file and every problem.
    expect(errorOf(() => parse({ overrides: [{ tenant: "e", resource: "r" }] })).message).toBe(
      "p.json: overrides[0]: expected at least one policy field to override",
    );
  });

  it("withPolicy re-applies overrides on the new policy, and refuses one that no longer fits", () => {
    const set = parse({ overrides: [{ tenant: "t", resource: "r", capacity: 3 }] });
    const next = withPolicy(set, "t", "r", { algorithm: "gcra", capacity: 100, refillPerSecond: 10 });
    expect(lookupPolicy(next, "t", "r")).toEqual({ algorithm: "gcra", capacity: 3, refillPerSecond: 10 });
    const rate = parse({ overrides: [{ tenant: "t", resource: "r", refillPerSecond: 3 }] });
    const err = errorOf(() =>
      withPolicy(rate, "*", "r", {
        algorithm: "fixed_window",
        capacity: 9,
        refillPerSecond: 9,
        windowMs: 1000,
      }),
    );
    expect(err.issues[0]).toMatch(
      /^overrides\[0\]\.refillPerSecond: fixed_window admits capacity per windowMs/,
    );
  });

  it("globMatch: * is any run of characters (property, against a regex)", () => {
    const alphabet = fc.constantFrom("a", "b", ".", "-", "*");
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 8 }).map((a) => a.join("")),
        fc.array(fc.constantFrom("a", "b", ".", "-", "/"), { maxLength: 10 }).map((a) => a.join("")),
        (glob, s) => {
          const re = new RegExp(`^${glob.replace(/[.-]/g, "\\$&").replace(/\*/g, ".*")}$`, "s");
          expect(globMatch(glob, s)).toBe(re.test(s));
        },
      ),
      { numRuns: 2000 },
    );
    // Many stars against a long non-match stays fast (no backtracking blow-up).
    expect(globMatch(`${"*a".repeat(60)}b`, "a".repeat(128))).toBe(false);
  });
});

describe("resolveKey: the meet over policy versions", () => {
  const version = (
    capacity: number,
    o: { shadow?: boolean; allow?: boolean; deny?: boolean; algorithm?: "gcra" } = {},
  ): PolicySet =>
    parse({
      policies: [
        {
          tenant: "t",
          resource: "r",
          capacity,
          refillPerSecond: capacity / 10,
          ...(o.algorithm !== undefined ? { algorithm: o.algorithm } : {}),
          ...(o.shadow === true ? { shadow: true } : {}),
        },
      ],
      ...(o.allow === true ? { allow: [{ key: "t/r*" }] } : {}),
      ...(o.deny === true ? { deny: [{ tenant: "t" }] } : {}),
    });
  const at = (sets: PolicySet[]) => resolveKey(sets, ids, "us-east", "t", "r");

  it("one set: exactly resolvePolicy and that set's lists", () => {
    const s = version(10, { shadow: true });
    expect(at([s])).toEqual({
      policy: resolvePolicy(s, ids, "us-east", "t", "r"),
      shadow: true,
      access: "limit",
    });
    expect(at([version(10, { allow: true, deny: true })]).access).toBe("deny");
    expect(at([version(10, { allow: true })]).access).toBe("allow");
    expect(() => resolveKey([], ids, "us-east", "t", "r")).toThrow(RangeError);
  });

  it("deny if any version denies; allow only if every version allows; shadow only if every limiting one is", () => {
    expect(at([version(10, { deny: true }), version(20, { allow: true })]).access).toBe("deny");
    expect(at([version(10, { allow: true }), version(20, { deny: true })]).access).toBe("deny");
    expect(at([version(10, { allow: true }), version(20)]).access).toBe("limit");
    expect(at([version(10, { allow: true }), version(20, { allow: true })]).access).toBe("allow");
    expect(at([version(10, { shadow: true }), version(20)]).shadow).toBe(false);
    expect(at([version(10), version(20, { shadow: true })]).shadow).toBe(false);
    expect(at([version(10, { shadow: true }), version(20, { shadow: true })]).shadow).toBe(true);
    // An allowing version is no limit: the other version's policy and shadow apply alone.
    const r = at([version(10, { allow: true }), version(20, { shadow: true, algorithm: "gcra" })]);
    expect(r).toMatchObject({ access: "limit", shadow: true });
    expect(r.policy.limit).toEqual({ algorithm: "gcra", capacity: 20, refillPerSecond: 2 });
    const back = at([version(20, { algorithm: "gcra" }), version(10, { allow: true })]);
    expect(back.policy.limit).toEqual({ algorithm: "gcra", capacity: 20, refillPerSecond: 2 });
  });

  it("overrides participate per version, before the meet", () => {
    const v1 = parse({
      policies: [{ tenant: "t", resource: "r", capacity: 100, refillPerSecond: 10 }],
      overrides: [{ tenant: "t", resource: "r", capacity: 4 }],
    });
    const v2 = parse({ policies: [{ tenant: "t", resource: "r", capacity: 50, refillPerSecond: 1 }] });
    expect(at([v1, v2]).policy.limit).toMatchObject({ capacity: 4, refillPerSecond: 1 });
    expect(resolveEffective([v1, v2], ids, "us-east", "t", "r")).toEqual(at([v1, v2]).policy);
  });

  it("property: the lattice rules over random versions", () => {
    const arbVersion = fc.record({
      capacity: fc.integer({ min: 1, max: 1000 }),
      shadow: fc.boolean(),
      allow: fc.boolean(),
      deny: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(arbVersion, { minLength: 1, maxLength: 5 }), (vs) => {
        const r = at(vs.map((v) => version(v.capacity, v)));
        const deny = vs.some((v) => v.deny);
        const allow = !deny && vs.every((v) => v.allow);
        expect(r.access).toBe(deny ? "deny" : allow ? "allow" : "limit");
        const limiting = deny || allow ? vs : vs.filter((v) => !v.allow);
        expect(r.shadow).toBe(r.access === "limit" && limiting.every((v) => v.shadow));
        expect(r.policy.limit.capacity).toBe(Math.min(...limiting.map((v) => v.capacity)));
        // Never looser than any limiting version.
        for (const v of limiting) expect(r.policy.limit.refillPerSecond).toBeLessThanOrEqual(v.capacity / 10);
      }),
      { numRuns: 300 },
    );
  });
});
