// Every algorithm's decisions on real Redis equal the pure model of
// @geoquota/core fed the same times: the scripts return the TIME they used,
// and the model replays each call at that instant. Equality is exact (same
// doubles): the Lua mirrors the model's arithmetic operation for operation.
import * as lease from "@geoquota/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { keyLimit } from "@geoquota/redis";
import type { Algorithm, KeyPolicy } from "@geoquota/core";
import { freshRegionPerFile, policy, receiptRef, sleep, TIMING } from "./redis-helpers.js";

const fx = freshRegionPerFile();

const op = fc.record({
  kind: fc.constantFrom("check", "check", "check", "refund"),
  cost: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom(0.5, 0.25, 1.75)),
  sleepMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 25 })),
});

/** A refund with a fresh receipt (the model has no receipts: refusals are tested elsewhere). */
async function refunded(p: KeyPolicy, cost: number, admittedUs: number) {
  const r = await fx.setup.store.refund(p, cost, receiptRef(admittedUs));
  if (!r.refunded) throw new Error(`refund refused: ${r.reason}`);
  return r.decision;
}

const algorithms: Algorithm[] = ["token_bucket", "gcra", "fixed_window", "sliding_window", "sliding_log"];

describe("scripts = model (replay with the scripts' own TIME)", () => {
  for (const algorithm of algorithms) {
    it(algorithm, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(op, { minLength: 4, maxLength: 12 }),
          fc.integer({ min: 200_000, max: 1_000_000 }),
          async (ops, base) => {
            const p = policy({ algorithm, capacity: 5, refillPerSecond: 40, windowMs: 120 }, { base });
            const region: lease.RegionState = { region: "eu", marker: fx.setup.marker };
            const key = lease.emptyKeyState();
            const limit = keyLimit(p);
            // Refunds name the latest admission (its Redis TIME), or one "from now" before any.
            let admittedUs = Date.now() * 1000;
            for (const o of ops) {
              if (o.sleepMs > 0) await sleep(o.sleepMs);
              const got =
                o.kind === "check"
                  ? await fx.setup.store.check(p, o.cost)
                  : await refunded(p, o.cost, admittedUs);
              const want =
                o.kind === "check"
                  ? lease.check(region, key, limit, TIMING, o.cost, got.nowUs)
                  : lease.refund(region, key, limit, TIMING, o.cost, admittedUs, got.nowUs);
              if (o.kind === "check" && got.allowed) admittedUs = got.nowUs;
              expect(got.allowed).toBe(want.allowed);
              expect(got.tokens).toBe(want.remaining);
              expect(got.share).toBe(want.share);
              expect(got.capacity).toBe(want.capacity);
            }
          },
        ),
        { numRuns: 8 },
      );
    });
  }
});
