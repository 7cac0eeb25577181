// Policies may name any key the check API takes (names with `/` included, `|` never): two
// entries whose names join to the same `tenant/resource` text must stay two parts, or a
// per-entry merge would drop one of them.
import { describe, expect, it } from "vitest";
import { entryPart, partsOf } from "../src/index.js";

describe("entry parts of any key name", () => {
  it("a/b + c and a + b/c are two parts; names without / keep the tenant/resource form", () => {
    const doc = {
      default: { capacity: 1, refillPerSecond: 1 },
      policies: [
        { tenant: "a/b", resource: "c", capacity: 2, refillPerSecond: 1 },
        { tenant: "a", resource: "b/c", capacity: 3, refillPerSecond: 1 },
        { tenant: "user:1@example.com", resource: "api", capacity: 4, refillPerSecond: 1 },
      ],
    };
    const parts = partsOf(doc);
    expect([...parts.keys()].filter((k) => k.startsWith("policies:")).sort()).toEqual([
      "policies:a/b|c",
      "policies:a|b/c",
      "policies:user:1@example.com/api",
    ]);
    expect(entryPart("t", "r")).toBe("policies:t/r");
    expect(entryPart("a/b", "c")).not.toBe(entryPart("a", "b/c"));
  });
});
