// DESIGN §5: the Redis Lua merge computes the same join as packages/crdt.
// Random counter entries and loan records (with deliberate equal-seq
// conflicts) are delivered to a real Redis in random order with duplicates;
// the result must equal the library's join of the same records.
import type { KeyPolicy } from "@geoquota/core";
import { KeyRecord } from "@geoquota/crdt";
import { initFreshRegion } from "@geoquota/limiter";
import { createGossipStore, type LoanRecord } from "@geoquota/redis";
import { redisPerFile } from "@geoquota/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

const SELF = "us-east";
const PEERS = ["eu-west", "ap-south"] as const;

describe("Lua merge = CRDT join (real Redis)", () => {
  const fx = redisPerFile(initFreshRegion);

  it("counters and loan registers converge to the same state", async () => {
    const store = createGossipStore({
      redis: fx.redis,
      region: SELF,
      timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
    });
    const [sec, usec] = (await fx.redis.time()) as [number | string, number | string];
    const nowUs = Number(sec) * 1e6 + Number(usec);
    const replica = fc.constantFrom("eu-west.a", "eu-west.b", "ap-south.a", "us-east.z");
    const amount = fc.oneof(
      fc.integer({ min: 0, max: 1_000_000 }),
      fc.double({ min: 0, max: 1e6, noNaN: true }),
    );
    const counterPart = fc.dictionary(replica, amount, { maxKeys: 4 });
    const loan = fc.record({
      lender: fc.constantFrom(...PEERS),
      units: fc.integer({ min: 0, max: 300_000 }),
      // Far enough ahead that no loan lapses during the test.
      deadlineUs: fc.integer({ min: nowUs + 600_000_000, max: nowUs + 600_000_100 }),
      // A small seq range forces equal-seq conflicts.
      seq: fc.integer({ min: 1, max: 4 }),
    });
    const update = fc.record({
      p: counterPart,
      n: counterPart,
      d: counterPart,
      loans: fc.array(loan, { maxLength: 3 }),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(update, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        async (updates, order) => {
          run++;
          const policy: KeyPolicy = {
            tenant: `t${run}`,
            resource: "merge",
            limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 10 },
            baseShare: 333_333,
            floorShare: 20_000,
          };
          const records = updates.map((u) => {
            const r = KeyRecord.initial();
            for (const [k, v] of Object.entries(u.p)) r.consumed.p.set(k, v);
            for (const [k, v] of Object.entries(u.n)) r.consumed.n.set(k, v);
            for (const [k, v] of Object.entries(u.d)) r.denied.set(k, v);
            for (const l of u.loans) r.loans.set(`${l.lender}>${SELF}`, { ...l, borrower: SELF });
            return r;
          });
          // Delivery: every record at least once, then random duplicates.
          const deliveries = [...records.keys(), ...order.map((i) => i % records.length)];
          const expected = KeyRecord.initial();
          for (const i of deliveries) {
            const r = records[i]!;
            KeyRecord.mergeInto(expected, r);
            const counters: Record<string, number> = {};
            for (const [k, v] of r.consumed.p) counters[`p|${k}`] = v;
            for (const [k, v] of r.consumed.n) counters[`n|${k}`] = v;
            for (const [k, v] of r.denied) counters[`d|${k}`] = v;
            const loans: LoanRecord[] = [...r.loans.values()];
            await store.mergeRemote(policy, loans, counters);
          }
          const view = await store.readKeyState(policy);
          const want: Record<string, number> = {};
          for (const [k, v] of expected.consumed.p) if (v > 0) want[`p|${k}`] = v;
          for (const [k, v] of expected.consumed.n) if (v > 0) want[`n|${k}`] = v;
          for (const [k, v] of expected.denied) if (v > 0) want[`d|${k}`] = v;
          expect(view.counterFields).toEqual(want);
          const got = Object.fromEntries(
            view.loansIn.map((l) => [l.lender, { units: l.units, deadlineUs: l.deadlineUs, seq: l.seq }]),
          );
          const wantLoans = Object.fromEntries(
            [...expected.loans.values()].map((l) => [
              l.lender,
              { units: l.units, deadlineUs: l.deadlineUs, seq: l.seq },
            ]),
          );
          expect(got).toEqual(wantLoans);
        },
      ),
      { numRuns: 60 },
    );
  });
});
