// Property: any interleaving of takes, clock advances and closes over several
// leased clients on one bucket admits at most C + r·T over every
// sub-interval (DESIGN §8 oracle, exact), and the bucket never holds more than
// capacity counting outstanding leases (trap 5).
import { checkGlobalBound } from "@geoquota/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeasedClient } from "../src/leased-client.js";
import type { KeyPolicy, Lease } from "@geoquota/core";
import { FakeStore } from "./helpers/fake-store.js";

/**
 * A store that can renew (like the Redis store): the client then reports
 * used-up leases inside its next acquire and forgets used-up leases at their
 * end. Same bucket semantics, releases applied first.
 */
class RenewingFakeStore extends FakeStore {
  async renewLease(
    p: KeyPolicy,
    releases: readonly { leaseId: string; used: number }[],
    tokens: number,
    durationMs: number,
  ): Promise<{ lease: Lease; returned: number[] }> {
    for (const r of releases) await this.releaseLease(p, r.leaseId, r.used);
    const lease =
      tokens > 0
        ? await this.acquireLease(p, tokens, durationMs)
        : { leaseId: "none", granted: 0, expiryUs: 0, nowUs: 0 };
    return { lease, returned: releases.map(() => 0) };
  }
}

const C = 10;
const R = 20;
const policy: KeyPolicy = {
  tenant: "p",
  resource: "r",
  limit: { algorithm: "token_bucket", capacity: C, refillPerSecond: R },
  baseShare: 1_000_000,
  floorShare: 20_000,
};

const op = fc.oneof(
  fc.record({
    kind: fc.constant("take" as const),
    client: fc.nat(2),
    cost: fc.constantFrom(0.5, 1, 2, 3),
    // A burst of takes at one instant drains what the bucket and the leases hold.
    times: fc.constantFrom(1, 1, 2, 12),
  }),
  // Steps around the lease duration (1000 ms) so expiries fall between takes.
  fc.record({
    kind: fc.constant("advance" as const),
    ms: fc.constantFrom(0, 1, 20, 50, 100, 400, 960, 1000, 1100),
  }),
  fc.record({ kind: fc.constant("close" as const), client: fc.nat(2) }),
);

const flush = () => new Promise((r) => setImmediate(r));

describe.each([
  ["release per lease", FakeStore],
  ["releases carried by the next acquire", RenewingFakeStore],
])("leased clients (property, %s)", (_name, Store) => {
  it("admit within C + r·T over every sub-interval; tokens + outstanding ≤ C", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 10, maxLength: 120 }),
        fc.nat(40),
        async (ops, batchSeed) => {
          let nowMs = 0;
          const store = new Store({ nowUs: () => nowMs * 1000 });
          const make = () =>
            new LeasedClient(store, policy, {
              clock: () => nowMs,
              batch: 1 + (batchSeed % 12),
              lowWater: batchSeed % 3,
              durationMs: 1000,
              marginMs: 50,
            });
          const clients = [make(), make(), make()];
          const admissions: { sentMs: number; answeredMs: number; cost: number }[] = [];
          for (const o of ops) {
            if (o.kind === "advance") nowMs += o.ms;
            else if (o.kind === "close") {
              await clients[o.client]!.close();
              clients[o.client] = make();
            } else {
              for (let i = 0; i < o.times; i++) {
                if (await clients[o.client]!.take(o.cost))
                  admissions.push({ sentMs: nowMs, answeredMs: nowMs, cost: o.cost });
              }
            }
            await flush();
            const view = await store.inspect(policy);
            expect(view.tokens + store.outstandingFor(policy)).toBeLessThanOrEqual(C + 1e-9);
          }
          await Promise.all(clients.map((c) => c.close()));
          const verdict = checkGlobalBound(admissions, { capacity: C, refillPerSecond: R });
          expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });
});
