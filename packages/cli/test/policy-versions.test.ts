// `policy status --wait` waits for the version the caller proposed in every
// region (issue 22): the asked region stable on an older target is not done.
import { describe, expect, it } from "vitest";
import { UsageError } from "../src/errors.js";
import {
  compareVersions,
  editOutcome,
  type PolicyState,
  parseVersion,
  settledAt,
  type VersionId,
} from "../src/policy/versions.js";

const d = (n: number) => n.toString(16).padStart(32, "0");
const v = (version: number, origin = "us-east", digest = d(version)): VersionId => ({
  version,
  origin,
  digest,
});

function state(completed: VersionId, acked: VersionId[], target = completed): PolicyState {
  return {
    region: "eu-west",
    replicated: true,
    phase: "stable",
    target,
    completed,
    growAtUs: null,
    policies: {},
    regions: acked.map((a, i) => ({ id: `r${i}`, acked: a })),
  };
}

describe("policy versions in the CLI", () => {
  it("parses v<version>@<origin>#<digest> (a prefix of 8 digits or more), else a usage error", () => {
    expect(parseVersion("--version", `v3@us-east#${d(3)}`)).toEqual(v(3));
    expect(parseVersion("--version", "v3@us-east#00000000")).toEqual({
      version: 3,
      origin: "us-east",
      digest: "00000000",
    });
    for (const bad of ["v3", "3@us-east#00000000", "v3@us-east#0000"])
      expect(() => parseVersion("--version", bad)).toThrow(UsageError);
  });

  it("orders by version, origin, digest; a digest prefix matches its digest", () => {
    expect(compareVersions(v(2), v(3))).toBeLessThan(0);
    expect(compareVersions(v(3, "us-east"), v(3, "eu-west"))).toBeGreaterThan(0);
    expect(compareVersions(v(3), { ...v(3), digest: d(3).slice(0, 8) })).toBe(0);
  });

  it("the asked region stable on its own older target has not settled the proposed version", () => {
    const old = v(1);
    const proposed = v(2, "ap-south");
    const s = state(old, [old, old, old]);
    expect(settledAt(s)).toBe(true); // its own target: settled
    expect(settledAt(s, proposed)).toBe(false);
    // Completed here but not acked everywhere yet: not settled.
    expect(settledAt(state(proposed, [proposed, old, proposed]), proposed)).toBe(false);
    expect(settledAt(state(proposed, [proposed, proposed, proposed]), proposed)).toBe(true);
    // A later version (a merge that includes it) settles it too.
    const later = v(3, "eu-west");
    expect(settledAt(state(later, [later, later, later]), proposed)).toBe(true);
  });

  it("tells whether an entry edit held or which edit won it", () => {
    const s: PolicyState = {
      ...state(v(2), [v(2)]),
      stamps: { "policies:cust_a/api": { v: 2, o: "eu-west", p: "theirs" } },
    };
    expect(editOutcome(s, "cust_a", "api", "theirs")).toBe("kept");
    expect(editOutcome(s, "cust_a", "api", "mine")).toEqual({ v: 2, o: "eu-west", p: "theirs" });
    expect(editOutcome({ ...s, stamps: null }, "cust_a", "api", "mine")).toBeUndefined();
  });
});
