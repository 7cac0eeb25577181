// documentOf (the document a static limiter serves at GET /v1/policy, and the seed of a
// replicated region started without one) keeps what the policies file says: a document read
// back from it resolves every key as the set it came from, wildcard overrides and policies
// named by any characters included.
import { lookupPolicy, parsePolicies } from "@geoquota/config";
import { describe, expect, it } from "vitest";
import { documentOf } from "../src/policy-source.js";

const IDS = ["us-east", "eu-west"];

describe("documentOf", () => {
  it("round-trips exact and wildcard overrides and any key name", () => {
    const set = parsePolicies(
      {
        default: { capacity: 5, refillPerSecond: 1 },
        policies: [{ tenant: "user:1@example.com", resource: "api", capacity: 9, refillPerSecond: 2 }],
        overrides: [
          { tenant: "user:1@example.com", resource: "x", capacity: 3 },
          { key: "acme-*/api", capacity: 7 },
          { key: "*/api", refillPerSecond: 4 },
        ],
      },
      "p.json",
      IDS,
    );
    const back = parsePolicies(documentOf(set), "back.json", IDS);
    for (const [t, r] of [
      ["user:1@example.com", "api"],
      ["user:1@example.com", "x"],
      ["acme-3", "api"],
      ["zed", "api"],
      ["zed", "other"],
    ] as const) {
      expect(lookupPolicy(back, t, r), `${t}/${r}`).toEqual(lookupPolicy(set, t, r));
    }
    expect(lookupPolicy(back, "acme-3", "api").capacity).toBe(7);
  });
});
