// Refunds never mint quota (DESIGN §7): through the HTTP app on a real Redis,
// a client refunds more than it was admitted every way it can — a repeated
// receipt, a forged one, an inflated cost, an expired receipt, another key's,
// another region's, none at all — and each is refused with its own 4xx code,
// while gross admissions stay within C + r·T plus the matched refunds (the
// exact oracle of DESIGN §8, no tolerance).
import { type PolicySet, parsePolicies } from "@geoquota/config";
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
import { createRedisStore, initFreshRegion, markerKey, shardOf } from "@geoquota/redis";
import { testConfig } from "./helpers/config.js";
import { sleep, TIMING } from "@geoquota/testkit";

const RESOURCE = "api";
const VICTIM = "victim";
const OTHER = "other";
const LIMIT = { capacity: 10, refillPerSecond: 1 };

let server: RedisServer;
let redis: Redis;
const apps: FastifyInstance[] = [];

function policiesFor(regionIds: string[]): PolicySet {
  return parsePolicies(
    {
      default: { capacity: 5, refillPerSecond: 1 },
      policies: [{ tenant: "*", resource: RESOURCE, ...LIMIT }],
    },
    "test-policies.json",
    regionIds,
  );
}

/** A one-region app (its slice is the whole limit, so the oracle's bound is exact for it). */
async function regionApp(region: string, patch: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const app = await limiterApp({
    store: createRedisStore({ redis, region, timing: TIMING }),
    config: testConfig({
      region,
      regions: [{ id: region, gossip: "127.0.0.1:7301" }],
      ...patch,
    }),
    policies: policiesFor([region]),
  });
  apps.push(app);
  return app;
}

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
});
afterAll(async () => {
  for (const a of apps) await a.close();
  await server?.stop();
});

/** The receipt format (`gq1.<payload>.<mac>`), to forge from a genuine one. */
function tamper(receipt: unknown, edit: (fields: string[]) => void): string {
  const [v, payload, mac] = String(receipt).split(".");
  const fields = Buffer.from(payload ?? "", "base64url")
    .toString("utf8")
    .split("|");
  edit(fields);
  return `${v}.${Buffer.from(fields.join("|")).toString("base64url")}.${mac}`;
}

describe("refund receipts", () => {
  it("refunds at most what was admitted: every abuse is refused and the bound holds", async () => {
    const app = await regionApp("us-east");
    // The same region (same Redis, same secret) issuing receipts with a 100 ms refund window.
    const shortWindow = await regionApp("us-east", { refund: { windowMs: 100 } });
    const euWest = await regionApp("eu-west");
    const admissions: Admission[] = [];
    const refunds: Refund[] = [];

    const check = async (tenant = VICTIM, target = app) => {
      const sentMs = performance.now();
      const r = await target.inject({
        method: "POST",
        url: "/v1/check",
        payload: { tenant, resource: RESOURCE },
      });
      const answeredMs = performance.now();
      const body = r.json() as { allowed: boolean; refundReceipt?: string };
      if (r.statusCode === 200 && tenant === VICTIM && target !== euWest)
        admissions.push({ sentMs, answeredMs, cost: 1, id: body.refundReceipt });
      return body;
    };
    /** Checks until the first denial: whatever a refund gave back is spent at once. */
    const drain = async () => {
      for (let i = 0; i < 40; i++) if (!(await check()).allowed) return;
    };
    const outcomes: [string, number, string | undefined][] = [];
    const refund = async (what: string, payload: Record<string, unknown>) => {
      const sentMs = performance.now();
      const r = await app.inject({ method: "POST", url: "/v1/refund", payload });
      const answeredMs = performance.now();
      const body = r.json() as { refunded?: number; code?: string };
      outcomes.push([what, r.statusCode, body.code]);
      if (r.statusCode === 200 && payload.tenant === VICTIM) {
        const admissionId = typeof payload.receipt === "string" ? payload.receipt : undefined;
        refunds.push({ sentMs, answeredMs, admissionId, cost: body.refunded ?? 0 });
      }
      await drain();
    };
    const victim = { tenant: VICTIM, resource: RESOURCE };

    const short = (await check(VICTIM, shortWindow)).refundReceipt;
    await drain();
    const receipts = admissions.slice(1).map((a) => a.id);
    const other = (await check(OTHER)).refundReceipt;
    const foreign = (await check(OTHER, euWest)).refundReceipt;

    await refund("full refund", { ...victim, receipt: receipts[0] });
    await refund("partial refund", { ...victim, receipt: receipts[1], cost: 0.5 });
    await refund("repeated receipt", { ...victim, receipt: receipts[0] });
    await refund("repeated partial receipt", { ...victim, receipt: receipts[1], cost: 0.5 });
    await refund("cost above the receipt's", { ...victim, receipt: receipts[2], cost: 5 });
    await refund("cost raised inside the receipt", {
      ...victim,
      receipt: tamper(receipts[3], (f) => {
        f[3] = "10";
      }),
      cost: 10,
    });
    await refund("made-up receipt", { ...victim, receipt: "gq1.AAAA.AAAA", cost: 1 });
    await refund("another key's receipt", { ...victim, receipt: other });
    await refund("receipt presented for another key", {
      tenant: OTHER,
      resource: RESOURCE,
      receipt: receipts[4],
    });
    await refund("another region's receipt", { tenant: OTHER, resource: RESOURCE, receipt: foreign });
    await refund("no receipt", { ...victim, cost: 10 });
    await sleep(150);
    await refund("expired receipt", { ...victim, receipt: short });

    // The guarantee first: gross admissions within C + r·T plus the refunds that match them.
    const verdict = checkGlobalBound(admissions, LIMIT, refunds);
    expect({
      ok: verdict.ok,
      worst: verdict.worstInterval,
      refundedUnmatched: verdict.refundedUnmatched,
      refundedMatched: verdict.refundedMatched,
    }).toEqual({ ok: true, worst: verdict.worstInterval, refundedUnmatched: 0, refundedMatched: 1.5 });
    expect(outcomes).toEqual([
      ["full refund", 200, undefined],
      ["partial refund", 200, undefined],
      ["repeated receipt", 409, "GQ_ERR_RECEIPT_USED"],
      ["repeated partial receipt", 409, "GQ_ERR_RECEIPT_USED"],
      ["cost above the receipt's", 400, "GQ_ERR_REFUND_EXCEEDS_RECEIPT"],
      ["cost raised inside the receipt", 403, "GQ_ERR_RECEIPT_INVALID"],
      ["made-up receipt", 403, "GQ_ERR_RECEIPT_INVALID"],
      ["another key's receipt", 403, "GQ_ERR_RECEIPT_WRONG_KEY"],
      ["receipt presented for another key", 403, "GQ_ERR_RECEIPT_WRONG_KEY"],
      ["another region's receipt", 403, "GQ_ERR_RECEIPT_WRONG_REGION"],
      ["no receipt", 400, "GQ_ERR_INVALID_BODY"],
      ["expired receipt", 410, "GQ_ERR_RECEIPT_EXPIRED"],
    ]);
    // Redis counted exactly the accepted refunds (`n|`), nothing for the refused ones.
    const q = (await app.inject({ method: "GET", url: `/v1/quotas/${VICTIM}/${RESOURCE}` })).json() as {
      counters: { refunded: Record<string, number> };
    };
    expect(Object.values(q.counters.refunded).reduce((a, b) => a + b, 0)).toBe(1.5);
  });

  it("a receipt from before the region lost its state is refused: the bucket it came from is gone", async () => {
    const app = await regionApp("us-east");
    const key = { tenant: "lost_tenant", resource: RESOURCE };
    const before = (await app.inject({ method: "POST", url: "/v1/check", payload: key })).json()
      .refundReceipt;
    // State loss of the tenant's shard (as FLUSHALL or a restart without persistence): a new
    // incarnation is born at the next script's TIME.
    await redis.del(markerKey(shardOf(key.tenant)));
    const r = await app.inject({ method: "POST", url: "/v1/refund", payload: { ...key, receipt: before } });
    expect(r.statusCode).toBe(410);
    expect(r.json()).toMatchObject({
      code: "GQ_ERR_RECEIPT_EXPIRED",
      message: "receipt: the region lost its state after this admission (the bucket it came from is gone)",
    });
  });
});
