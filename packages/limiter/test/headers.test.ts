// rateLimitHeaders on its own: values a structured-field Integer cannot hold
// (15 digits) are clamped instead of making the serializer throw (a 500).
import fc from "fast-check";
import { type Item, parseList, serializeList } from "structured-headers";
import { describe, expect, it } from "vitest";
import {
  baseSliceOf,
  type HeaderOptions,
  partitionKeyOf,
  rateLimitHeaders,
  windowSeconds,
} from "../src/headers.js";
import { decisionNumbers, SF_INTEGER_MAX } from "../src/decision-numbers.js";
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

  it("writes the structured fields exactly as the structured-headers serializer does, for any decision", () => {
    /** The two fields as the library serializes them (the writer before issue 24 point 3). */
    const reference = (r: HeaderFields, options: HeaderOptions) => {
      const n = decisionNumbers(r);
      const w = windowSeconds(r.policy.limit);
      const pk = partitionKeyOf(`${r.policy.tenant}|${r.policy.resource}`, options);
      const params = (entries: [string, number][]) => {
        const m = new Map<string, number | ArrayBuffer>(entries);
        if (pk !== undefined) m.set("pk", new Uint8Array(pk).buffer);
        return m;
      };
      const windowed = (q: number, on: boolean): [string, number][] =>
        on && w !== undefined
          ? [
              ["q", q],
              ["w", w],
            ]
          : [["q", q]];
      const scopeQuota = r.scope === "region" ? baseSliceOf(r.policy) : n.limit;
      const policies: Item[] = [
        ["global", params(windowed(n.globalLimit, true))],
        [r.scope, params(windowed(scopeQuota, r.scope === "region" || r.source === "fail_open"))],
      ];
      const service: Item = [
        r.scope,
        params([
          ["r", n.remaining],
          ["t", n.reset],
        ]),
      ];
      return { policy: serializeList(policies), ratelimit: serializeList([service]) };
    };
    const raw = fc.oneof(
      fc.double({ min: 0, max: 1e6, noNaN: true }),
      fc.double({ noNaN: true }),
      fc.constantFrom(0, 0.5, 1, SF_INTEGER_MAX, SF_INTEGER_MAX + 1, Number.POSITIVE_INFINITY),
    );
    const policy = fc.record({
      tenant: fc.string({ minLength: 1, maxLength: 12 }),
      resource: fc.string({ minLength: 1, maxLength: 12 }),
      limit: fc.oneof(
        fc.record({
          algorithm: fc.constantFrom("token_bucket" as const, "gcra" as const),
          capacity: fc.double({ min: 0, max: 1e18, noNaN: true }),
          refillPerSecond: fc.double({ min: 0, max: 1e9, noNaN: true }),
        }),
        fc.record({
          algorithm: fc.constantFrom("fixed_window" as const, "sliding_window" as const),
          capacity: fc.integer({ min: 0, max: 1e6 }),
          refillPerSecond: fc.double({ min: 0, max: 1e6, noNaN: true }),
          windowMs: fc.integer({ min: 1, max: 1e9 }),
        }),
      ),
      baseShare: fc.integer({ min: 0, max: 1_000_000 }),
      floorShare: fc.constant(0),
    });
    const options = fc.oneof(
      fc.constant<HeaderOptions>({}),
      fc.constant<HeaderOptions>({ partitionKey: "omit" }),
      fc.constant<HeaderOptions>({ partitionKey: "raw" }),
      fc
        .string({ minLength: 1, maxLength: 8 })
        .map((secret): HeaderOptions => ({ partitionKeySecret: secret })),
    );
    const decision = fc.record({
      allowed: fc.boolean(),
      limit: raw,
      remaining: raw,
      scope: fc.constantFrom("region" as const, "process" as const),
      scopeLimit: raw,
      resetSeconds: raw,
      retryAfterSeconds: raw,
      degraded: fc.boolean(),
      source: fc.constantFrom("store" as const, "lease" as const, "fail_open" as const),
      policy,
    });
    fc.assert(
      fc.property(decision, options, (r, o) => {
        const h = rateLimitHeaders(r, o);
        const want = reference(r, o);
        expect(h["ratelimit-policy"]).toBe(want.policy);
        expect(h.ratelimit).toBe(want.ratelimit);
        // Again, from the per-key cache of the pk parameter.
        expect(rateLimitHeaders(r, o).ratelimit).toBe(want.ratelimit);
      }),
      { numRuns: 500 },
    );
  });
});
