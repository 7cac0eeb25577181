// Properties of the numbers a decision reports (decision-numbers.ts), and that
// the headers and the JSON body, both built from them, agree for any decision.
import fc from "fast-check";
import { parseList } from "structured-headers";
import { describe, expect, it } from "vitest";
import { decisionNumbers, SF_INTEGER_MAX } from "../src/decision-numbers.js";
import { decisionBody, rateLimitHeaders } from "../src/headers.js";
import type { CheckResult } from "../src/limiter.js";

/** A decision's raw number: fractional, huge, negative or infinite (never NaN: the engine maps it away). */
const raw = fc.oneof(
  fc.double({ min: 0, max: 1e6, noNaN: true }),
  fc.double({ noNaN: true }),
  fc.constantFrom(0, 0.5, 1, SF_INTEGER_MAX, SF_INTEGER_MAX + 1, Number.POSITIVE_INFINITY),
);

const decision: fc.Arbitrary<CheckResult> = fc.record({
  allowed: fc.boolean(),
  limit: raw,
  remaining: raw,
  scope: fc.constantFrom("region" as const, "process" as const),
  scopeLimit: raw,
  resetSeconds: raw,
  retryAfterSeconds: raw,
  region: fc.constant("us-east"),
  degraded: fc.boolean(),
  source: fc.constantFrom("store" as const, "lease" as const, "fail_open" as const),
  policy: fc.constant({
    tenant: "t",
    resource: "r",
    limit: { algorithm: "token_bucket" as const, capacity: 100, refillPerSecond: 10 },
    baseShare: 500_000,
    floorShare: 20_000,
  }),
});

const isHeaderInteger = (x: number) => Number.isInteger(x) && x >= 0 && x <= SF_INTEGER_MAX;
const inRange = (x: number) => Number.isFinite(x) && x >= 0 && x <= SF_INTEGER_MAX;

describe("decisionNumbers", () => {
  it("whole numbers a header can carry; never more than the decision holds, less by under one", () => {
    fc.assert(
      fc.property(decision, (r) => {
        const n = decisionNumbers(r);
        for (const x of [n.limit, n.remaining, n.globalLimit, n.reset, n.retryAfter])
          expect(isHeaderInteger(x)).toBe(true);
        for (const [out, given] of [
          [n.limit, r.scopeLimit],
          [n.remaining, r.remaining],
          [n.globalLimit, r.limit],
        ] as const)
          if (inRange(given)) {
            expect(out).toBeLessThanOrEqual(given);
            expect(given - out).toBeLessThan(1);
          }
        if (r.remaining <= r.scopeLimit) expect(n.remaining).toBeLessThanOrEqual(n.limit);
      }),
      { numRuns: 2000 },
    );
  });

  it("Retry-After is at least 1 s and never before the wait; a denial's resets are the Retry-After value", () => {
    fc.assert(
      fc.property(decision, (r) => {
        const n = decisionNumbers(r);
        expect(n.retryAfter).toBeGreaterThanOrEqual(1);
        if (inRange(r.retryAfterSeconds)) expect(n.retryAfter).toBeGreaterThanOrEqual(r.retryAfterSeconds);
        if (!r.allowed) expect(n.reset).toBe(n.retryAfter);
        else if (inRange(r.resetSeconds)) {
          expect(n.reset).toBeGreaterThanOrEqual(r.resetSeconds);
          expect(n.reset - 1).toBeLessThan(r.resetSeconds);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("the headers and the body of one decision say the same numbers", () => {
    fc.assert(
      fc.property(decision, (r) => {
        const h = rateLimitHeaders(r);
        const b = decisionBody(r);
        const [service] = parseList(h.ratelimit!) as [[string, Map<string, unknown>]];
        const [global] = parseList(h["ratelimit-policy"]!) as [[string, Map<string, unknown>]];
        expect(service[0]).toBe(b.scope);
        expect(service[1].get("r")).toBe(b.remaining);
        expect(h["ratelimit-remaining"]).toBe(String(b.remaining));
        expect(h["x-ratelimit-remaining"]).toBe(String(b.remaining));
        expect(h["ratelimit-limit"]).toBe(String(b.limit));
        expect(h["x-ratelimit-limit"]).toBe(String(b.limit));
        expect(global[1].get("q")).toBe(b.global.limit);
        expect(b[b.scope === "region" ? "regional" : "process"]).toEqual({
          limit: b.limit,
          remaining: b.remaining,
        });
        const reset = Number(h["ratelimit-reset"]);
        expect(service[1].get("t")).toBe(reset);
        expect(h["x-ratelimit-reset"]).toBe(String(reset));
        if (r.allowed) expect(h["retry-after"]).toBeUndefined();
        else expect(h["retry-after"]).toBe(String(reset));
      }),
      { numRuns: 1000 },
    );
  });
});
