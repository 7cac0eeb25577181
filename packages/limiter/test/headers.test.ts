// rateLimitHeaders on its own: values a structured-field Integer cannot hold
// (15 digits) are clamped instead of making the serializer throw (a 500).
import { parseList } from "structured-headers";
import { describe, expect, it } from "vitest";
import { rateLimitHeaders, windowSeconds } from "../src/headers.js";
import { SF_INTEGER_MAX } from "../src/decision-numbers.js";
import type { HeaderFields } from "../src/headers.js";

const base: HeaderFields = {
  allowed: false,
  limit: 1e18,
  remaining: 3.9,
  scope: "region",
  scopeLimit: 5e17,
  resetSeconds: 1e20,
  retryAfterSeconds: Number.POSITIVE_INFINITY,
  degraded: false,
  source: "store",
  policy: {
    tenant: "t",
    resource: "r",
    limit: { algorithm: "token_bucket", capacity: 1e18, refillPerSecond: 1e-9 },
    baseShare: 500_000,
    floorShare: 20_000,
  },
};

describe("rateLimitHeaders", () => {
  it("clamps huge values to the structured-field Integer range", () => {
    const h = rateLimitHeaders(base);
    const [global, region] = parseList(h["ratelimit-policy"]!) as [
      [string, Map<string, unknown>],
      [string, Map<string, unknown>],
    ];
    expect(global[1].get("q")).toBe(SF_INTEGER_MAX);
    expect(global[1].get("w")).toBe(SF_INTEGER_MAX);
    expect(region[1].get("q")).toBe(SF_INTEGER_MAX);
    const [service] = parseList(h.ratelimit!) as [[string, Map<string, unknown>]];
    expect(service[1].get("r")).toBe(3);
    expect(service[1].get("t")).toBe(SF_INTEGER_MAX);
    expect(h["retry-after"]).toBe(String(SF_INTEGER_MAX));
  });

  it("windows: windowMs for the window algorithms, C/r otherwise, none without refill", () => {
    expect(
      windowSeconds({ algorithm: "fixed_window", capacity: 30, refillPerSecond: 0.5, windowMs: 60_000 }),
    ).toBe(60);
    expect(
      windowSeconds({ algorithm: "sliding_log", capacity: 30, refillPerSecond: 300, windowMs: 100 }),
    ).toBe(1);
    expect(windowSeconds({ algorithm: "gcra", capacity: 10, refillPerSecond: 3 })).toBe(4);
    expect(windowSeconds({ algorithm: "token_bucket", capacity: 10, refillPerSecond: 0 })).toBeUndefined();
  });
});
