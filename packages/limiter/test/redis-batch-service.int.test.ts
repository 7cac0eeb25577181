// Micro-batched checks in the region service (config redis.batch; the store's batching is
// packages/redis/test/redis-batch.int.test.ts): the service's checks go out batched, and a
// Redis that stops answering sends every check of a batch to the degraded path, as without
// batching.
import { parsePolicies } from "@geoquota/config";
import { startRedis } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { startRegionService } from "../src/main.js";
import { regionConfig } from "./helpers/config.js";

async function evalshaCalls(client: Redis): Promise<number> {
  const m = /cmdstat_evalsha:calls=(\d+)/.exec(await client.info("commandstats"));
  return Number(m?.[1] ?? 0);
}

interface Answer {
  readonly allowed: boolean;
  readonly degraded: boolean;
  readonly failOpenBound?: unknown;
}

describe("micro-batched checks in the region service (redis.batch)", () => {
  for (const failMode of ["closed", "open"] as const) {
    it(`batches the service's checks; a Redis that stops answering sends every check of a batch to the degraded path (fail ${failMode}), as without batching`, async () => {
      const own = await startRedis();
      const policies = parsePolicies(
        { default: { capacity: 100, refillPerSecond: 10 }, policies: [] },
        "test-policies.json",
      );
      const start = (batch: boolean) =>
        startRegionService({
          config: regionConfig(
            { url: own.url, timeoutMs: 200, ...(batch ? { batch: { maxChecks: 4, maxWaitUs: 1000 } } : {}) },
            { failMode },
          ),
          policies,
          port: 0,
          fresh: true,
        });
      const batched = await start(true);
      const single = await start(false);
      const stats = own.client();
      try {
        const check = (url: string, i: number) =>
          fetch(`${url}/v1/check`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ tenant: `svc_${failMode}_${i}`, resource: "api" }),
          }).then(async (r) => (await r.json()) as Answer);
        const four = (url: string) => Promise.all([0, 1, 2, 3].map((i) => check(url, i)));
        await four(batched.url); // scripts loaded
        const before = await evalshaCalls(stats);
        const ok = await four(batched.url);
        expect(ok.map((b) => [b.allowed, b.degraded])).toEqual(Array(4).fill([true, false]));
        // Four checks, one script call (INFO is not an EVALSHA).
        expect((await evalshaCalls(stats)) - before).toBe(1);
        own.pause();
        let down: Answer[][];
        try {
          down = await Promise.all([four(batched.url), four(single.url)]);
        } finally {
          own.resume();
        }
        // Closed: denied; open: the process's own fail-open bucket answers (it starts empty and
        // refills with time, so what it admits is not compared, only that it answered).
        const degraded = (b: Answer) =>
          failMode === "open" ? [b.degraded, b.failOpenBound !== undefined] : [b.degraded, b.allowed];
        const expected = Array(4).fill(failMode === "open" ? [true, true] : [true, false]);
        expect(down[0]?.map(degraded)).toEqual(expected);
        expect(down[1]?.map(degraded)).toEqual(expected);
      } finally {
        await batched.close();
        await single.close();
        await own.stop();
      }
    });
  }
});
