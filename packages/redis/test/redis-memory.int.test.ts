// MEMORY USAGE of each key class per algorithm (packages/redis/README.md's table comes
// from `GQ_MEMORY_REPORT=<file> vitest run … redis-memory`). The assertions are
// budgets, so a change that bloats the per-key state fails here.
import { writeFileSync } from "node:fs";
import { redisPerFile } from "@geoquota/testkit";
import { expect, it } from "vitest";
import { createGossipStore, createRedisStore, initFreshRegion, keyNames } from "@geoquota/redis";
import type { Algorithm } from "@geoquota/core";
import { policy, TIMING } from "./redis-helpers.js";

const fx = redisPerFile(initFreshRegion);

/** P:b alone, counters inside (one small listpack hash; issue 24 point 5's 160 B is per key with a short name). */
const BUDGET_BYTES = 200;
/** The other key classes (loans, leases, a key's hash with three regions' counters and a loan). */
const BUDGET_OTHER_BYTES = 400;

it("per-key memory stays within budget for every algorithm and key class", async () => {
  const store = createRedisStore({ redis: fx.redis, region: "eu-west-1", timing: TIMING });
  const gossip = createGossipStore({ redis: fx.redis, region: "eu-west-1", timing: TIMING });
  const rows: string[] = [];
  const algorithms: Algorithm[] = ["token_bucket", "gcra", "fixed_window", "sliding_window", "sliding_log"];
  for (const algorithm of algorithms) {
    const p = policy({ algorithm, capacity: 100, refillPerSecond: 10, windowMs: 60_000 }, { base: 500_000 });
    for (let i = 0; i < 10; i++) await store.check(p, 1);
    const [b, c, l, k, z] = keyNames(p.tenant, p.resource);
    const usage = async (key: string) =>
      Number((await fx.redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")) ?? 0);
    // The counters live in P:b (lua/lib/keep.lua): no P:c is written.
    expect(await fx.redis.exists(c as string)).toBe(0);
    const cells: Record<string, number> = { "P:b": await usage(b) };
    if (algorithm === "sliding_log") cells["P:z (10 entries)"] = await usage(z);
    if (algorithm === "token_bucket") {
      await gossip.grantLoan(p, "us-east-1", 100_000);
      await gossip.mergeRemote(
        p,
        [
          {
            lender: "ap-south-1",
            borrower: "eu-west-1",
            units: 50_000,
            deadlineUs: Date.now() * 1000 + 3e6,
            seq: 1,
          },
        ],
        {
          "p|us-east-1.1700000000000000": 12,
          "p|ap-south-1.1700000000000000": 7,
        },
      );
      cells["P:l (1 out, 1 in)"] = await usage(l);
      cells["P:b (3 replicas' counters, loans)"] = await usage(b);
      await store.acquireLease(p, 10, 1000);
      cells["P:k (1 lease)"] = await usage(k);
    }
    for (const [cls, bytes] of Object.entries(cells)) {
      rows.push(`| ${algorithm} | ${cls} | ${bytes} |`);
      if (cls === "P:b") expect(bytes, `${algorithm} ${cls}`).toBeLessThanOrEqual(BUDGET_BYTES);
      else if (!cls.startsWith("P:z"))
        expect(bytes, `${algorithm} ${cls}`).toBeLessThanOrEqual(BUDGET_OTHER_BYTES);
    }
  }
  const report = process.env.GQ_MEMORY_REPORT;
  if (report) writeFileSync(report, `| algorithm | key | bytes |\n|---|---|---|\n${rows.join("\n")}\n`);
});
