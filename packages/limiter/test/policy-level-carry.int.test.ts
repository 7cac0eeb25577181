// Issue 22 point 2 on real Redis: a same-algorithm policy change carries the
// bucket's level over (DESIGN §3: tokens settled at the old policy, clamped to
// the new capacity, then refilled at the new rate). Before, a tenant with 332
// of 333 tokens got 429s right after its limit was doubled, and again after it
// was lowered (the bucket restarted empty). Two regions (a redis-server each,
// half the base each) play what both enforce after the rollout completed;
// every admission is judged by the exact oracle with the limit schedule
// (across a change: max(C_old, C_new) + max(r_old, r_new)·T).
import { createRedisStore, initFreshRegion, type RedisRegionStore } from "@geoquota/redis";
import {
  type Admission,
  checkGlobalBound,
  type LimitSegment,
  type RedisServer,
  startRedisServers,
} from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Algorithm, KeyPolicy, Timing } from "@geoquota/core";
import { policy } from "@geoquota/testkit";

const TIMING: Timing = { epsilonUs: 50_000, loanDurationUs: 3_000_000 };
const HALF = 500_000;

let servers: RedisServer[] = [];
let stores: RedisRegionStore[] = [];

beforeAll(async () => {
  servers = await startRedisServers(2);
  for (const s of servers) await initFreshRegion(s.client());
  stores = servers.map((s, i) => createRedisStore({ redis: s.client(), region: `r${i}`, timing: TIMING }));
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const withLimit = (p: KeyPolicy, capacity: number, refillPerSecond: number): KeyPolicy => ({
  ...p,
  limit: { ...p.limit, capacity, refillPerSecond },
});

describe("a same-algorithm policy change keeps the bucket's level (issue 22 point 2)", () => {
  for (const algorithm of ["token_bucket", "gcra"] as const satisfies readonly Algorithm[]) {
    it(`${algorithm}: after a raise, and after a lower, the tenant still admits; the bound holds across both`, async () => {
      // C = 60 (30 per region), r = 0.5/s: an emptied bucket would need a minute to refill
      // (the refill during a burst of a few ms is far below one token).
      const old = policy({ algorithm, capacity: 60, refillPerSecond: 0.5 }, { base: HALF, floor: 20_000 });
      const admissions: Admission[] = [];
      const segments: LimitSegment[] = [];
      let current = { capacity: 60, refillPerSecond: 0.5, fromMs: Number.NEGATIVE_INFINITY };
      /** From `sentMs` on the new limit holds, before it the old one (an interval meeting both: their max). */
      const change = (capacity: number, refillPerSecond: number, sentMs: number) => {
        // Checks sent from here on get the new policy: the old one ends here (toMs is exclusive).
        segments.push({ ...current, toMs: sentMs });
        current = { capacity, refillPerSecond, fromMs: sentMs };
      };
      /** `n` checks of cost 1 in each region, interleaved; how many each admitted. */
      const burst = async (p: KeyPolicy, n: number): Promise<number[]> => {
        const got = stores.map(() => 0);
        for (let i = 0; i < n; i++) {
          for (const [r, store] of stores.entries()) {
            const sentMs = performance.now();
            const d = await store.check(p, 1);
            if (d.allowed) {
              admissions.push({ sentMs, answeredMs: performance.now(), cost: 1 });
              got[r] = (got[r] ?? 0) + 1;
            }
          }
        }
        return got;
      };
      // A full bucket (30 per region), one token spent in each.
      expect(await burst(old, 1)).toEqual([1, 1]);

      // Doubled (C 120, r 1): the 29 left in each region are carried over, so all 10 are admitted.
      const raised = withLimit(old, 120, 1);
      change(120, 1, performance.now());
      expect(await burst(raised, 10), "admitted right after the raise").toEqual([10, 10]);

      // Lowered (C 20: 10 per region, r 0.25): the 19 left are clamped to the new 10, not emptied
      // (and not kept above the new capacity: after the change the new bound holds alone).
      const lowered = withLimit(old, 20, 0.25);
      change(20, 0.25, performance.now());
      expect(await burst(lowered, 15), "admitted right after the lower").toEqual([10, 10]);

      segments.push({ ...current, toMs: Number.POSITIVE_INFINITY });
      const v = checkGlobalBound(admissions, { segments });
      expect(v.ok, JSON.stringify(v.worstInterval)).toBe(true);
    }, 60_000);
  }
});
