// A refund erases the admission it names (DESIGN §7), on a real Redis through
// the HTTP app: the audit's case. A burst drains the bucket; the bucket
// refills to full; a second burst drains it again; then the first burst's
// receipts are refunded — admissions the full bucket no longer keeps out of
// it. Counting each refund as fresh capacity gives a third burst of C within
// milliseconds of the second (2C against C + r·T); erasing them gives back
// nothing. The exact oracle (refunded admissions removed, the rest checked)
// decides. A refund right after its admission still gives all of it back.
import { type PolicySet, parsePolicies } from "@geoquota/config";
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import {
  type Admission,
  checkGlobalBound,
  type RedisServer,
  type Refund,
  startRedis,
} from "@geoquota/testkit";
import type { FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { testConfig } from "./helpers/config.js";
import { sleep, TIMING } from "@geoquota/testkit";

const RESOURCE = "api";
const REGION = "us-east";
/** C = 10, a full refill in 1 s. */
const LIMIT = { capacity: 10, refillPerSecond: 10 };

let server: RedisServer;
let redis: Redis;
let app: FastifyInstance;

function policies(): PolicySet {
  return parsePolicies(
    {
      default: { capacity: 5, refillPerSecond: 1 },
      policies: [{ tenant: "*", resource: RESOURCE, ...LIMIT }],
    },
    "test-policies.json",
    [REGION],
  );
}

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
  app = await limiterApp({
    store: createRedisStore({ redis, region: REGION, timing: TIMING }),
    config: testConfig({ region: REGION, regions: [{ id: REGION, gossip: "127.0.0.1:7301" }] }),
    policies: policies(),
  });
});
afterAll(async () => {
  await app?.close();
  await server?.stop();
});

describe("a refund erases the admission it names", () => {
  it("refunds of admissions the refilled bucket no longer keeps out mint no burst; a prompt refund gives all back", async () => {
    const tenant = `erase${process.pid}`;
    const admissions: Admission[] = [];
    const refunds: Refund[] = [];
    const check = async () => {
      const sentMs = performance.now();
      const r = await app.inject({
        method: "POST",
        url: "/v1/check",
        payload: { tenant, resource: RESOURCE },
      });
      const answeredMs = performance.now();
      const body = r.json() as { allowed: boolean; refundReceipt?: string };
      if (r.statusCode === 200 && body.allowed)
        admissions.push({ sentMs, answeredMs, cost: 1, id: body.refundReceipt });
      return body;
    };
    const drain = async () => {
      let n = 0;
      for (let i = 0; i < 40; i++) {
        if (!(await check()).allowed) return n;
        n += 1;
      }
      return n;
    };
    const refund = async (receipt: string) => {
      const sentMs = performance.now();
      const r = await app.inject({
        method: "POST",
        url: "/v1/refund",
        payload: { tenant, resource: RESOURCE, receipt },
      });
      const answeredMs = performance.now();
      expect(r.statusCode, JSON.stringify(r.json())).toBe(200);
      refunds.push({ sentMs, answeredMs, admissionId: receipt, cost: 1 });
    };

    const first = await drain();
    expect(first).toBeGreaterThanOrEqual(10);
    const old = admissions.map((a) => a.id as string);
    await sleep(1300); // the bucket is full again
    const second = await drain();
    expect(second).toBeGreaterThanOrEqual(10);
    for (const id of old) await refund(id);
    const third = await drain();

    // The guarantee first: the history without the refunded admissions within C + r·T.
    const verdict = checkGlobalBound(admissions, LIMIT, refunds);
    expect({ ok: verdict.ok, worst: verdict.worstInterval, unmatched: verdict.refundedUnmatched }).toEqual({
      ok: true,
      worst: verdict.worstInterval,
      unmatched: 0,
    });
    // What the old rule did: the refunds filled the bucket again.
    expect(third).toBeLessThan(5);

    // A refund right after its admission gives it all back: one more admission at once.
    await sleep(1300);
    await drain();
    const last = admissions[admissions.length - 1]?.id as string;
    await refund(last);
    expect(await drain()).toBeGreaterThanOrEqual(1);
    expect(checkGlobalBound(admissions, LIMIT, refunds).ok).toBe(true);
  });
});
