// The RLQS stream (DESIGN §11, issue 28 first slice) with an in-process gRPC client, over
// assignments reserved in a real Redis by lua/assign_reserve.lua: an assignment per new bucket,
// a renewal before the TTL runs out (a fresh reservation), DENY_ALL for a deny-listed bucket,
// abandon_action when the stream closes and on shutdown, INVALID_ARGUMENT without a domain.
import * as grpc from "@grpc/grpc-js";
import type { KeyPolicy, Timing } from "@geoquota/core";
import { assignReserveArgs, bindScripts, initFreshRegion, keyArgsBuilder, shardOf } from "@geoquota/redis";
import { keyPolicy, type RedisServer, startRedisServers } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  type RlqsAsk,
  type RlqsBackend,
  type RlqsOptions,
  type RlqsReports,
  type RlqsResponse,
  RlqsService,
  rlqsApi,
} from "../src/rlqs.js";

const TIMING: Timing = { epsilonUs: 250_000, loanDurationUs: 3_000_000 };
let server: RedisServer;
let redis: Redis;
const args = keyArgsBuilder(TIMING);
let n = 0;

beforeAll(async () => {
  [server] = (await startRedisServers(1)) as [RedisServer];
  redis = server.client();
  await initFreshRegion(redis);
});
afterAll(async () => {
  await server?.stop();
});

/** A backend on the real scripts: a bucket {tenant, resource} is that policy; {deny: …} is deny-listed. */
function backend(
  p: KeyPolicy,
  reports: { allowed: number; denied: number }[],
  reserveDelayMs: number,
  asks: RlqsAsk[],
  control: { refuse: boolean },
): RlqsBackend {
  const scripts = bindScripts(redis);
  return {
    match: (_domain, bucket) =>
      bucket.deny !== undefined ? { kind: "deny" } : { kind: "policy", tenant: "t", resource: "api" },
    // A slice of 50% of C = 100, R = 100/s: the first assignment asks for half of its rate (25/s, a burst of 1).
    limits: () => ({ capacity: 100, rate: 100, sliceCapacity: 50, sliceRate: 50 }),
    reserve: async (_key, ask, ttlUs, marginUs) => {
      if (reserveDelayMs > 0) await new Promise((r) => setTimeout(r, reserveDelayMs));
      asks.push(ask);
      if (control.refuse) return { burst: 0, rate: 0, ttlUs: 0 };
      const r = await scripts.run(
        "assignReserve",
        assignReserveArgs(args(p), "eu", ask.id, ask.burst, ask.rate, ttlUs, marginUs, ask.supersedes ?? ""),
      );
      return { burst: r.burst, rate: r.rate, ttlUs: r.ttlUs, shareUnits: r.shareUnits };
    },
    report: async (_key, allowed, denied) => {
      reports.push({ allowed, denied });
    },
  };
}

async function rig(opts: Partial<RlqsOptions>, reserveDelayMs = 0) {
  n += 1;
  const base = keyPolicy({ tenant: `q${process.pid}x${n}`, capacity: 100, refillPerSecond: 100 });
  const p: KeyPolicy = { ...base, baseShare: 500_000 };
  const reports: { allowed: number; denied: number }[] = [];
  const asks: RlqsAsk[] = [];
  const control = { refuse: false };
  const svc = new RlqsService(backend(p, reports, reserveDelayMs, asks, control), opts, `s${n}`);
  const g = new grpc.Server();
  g.addService(rlqsApi().service, svc.handlers());
  const port = await new Promise<number>((res, rej) =>
    g.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, port) =>
      e ? rej(e) : res(port),
    ),
  );
  const client = new (rlqsApi().Client)(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const open = client.StreamRateLimitQuotas as () => grpc.ClientDuplexStream<RlqsReports, RlqsResponse>;
  /** One proxy's stream: what it was sent, in order. */
  const stream = () => {
    const call = open.call(client);
    const got: RlqsResponse[] = [];
    const waiters: (() => void)[] = [];
    call.on("data", (m: RlqsResponse) => {
      got.push(m);
      for (const w of waiters.splice(0)) w();
    });
    const next = async (count: number) => {
      while (got.length < count) await new Promise<void>((r) => waiters.push(r));
      return got[count - 1] as RlqsResponse;
    };
    const ended = new Promise<grpc.StatusObject>((res) => call.on("status", res));
    call.on("error", () => {});
    return { call, got, next, ended };
  };
  const { call, got, next, ended } = stream();
  const stop = async () => {
    svc.shutdown();
    client.close();
    await new Promise<void>((r) => g.tryShutdown(() => r()));
  };
  const leases = () => redis.hgetall(`gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:k`);
  return { svc, policy: p, call, next, ended, stop, reports, leases, got, asks, stream, control };
}

const bucket = {
  bucket: [
    { key: "tenant", value: "t" },
    { key: "resource", value: "api" },
  ],
};
const usage = (allowed: number, denied: number) => ({
  bucket_id: bucket,
  time_elapsed: { seconds: 0, nanos: 200_000_000 },
  num_requests_allowed: allowed,
  num_requests_denied: denied,
});

it("a new bucket gets a token bucket reserved until TTL plus the margin; reports reach the backend; close abandons", async () => {
  const r = await rig({ assignmentTtlMs: 1000, deliveryMarginMs: 200, renewBeforeMs: 300 });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    const m = await r.next(1);
    const a = m.bucket_action[0] as Extract<
      RlqsResponse["bucket_action"][number],
      { quota_assignment_action: unknown }
    >;
    expect(a.bucket_id.bucket).toEqual(bucket.bucket);
    expect(a.quota_assignment_action.assignment_time_to_live).toEqual({ seconds: 1, nanos: 0 });
    const s = a.quota_assignment_action.rate_limit_strategy;
    expect(s).toMatchObject({ token_bucket: { max_tokens: 1, tokens_per_fill: { value: 1 } } });
    // 25/s asked: one token every 40 ms (never faster than reserved).
    expect(s).toMatchObject({ token_bucket: { fill_interval: { seconds: 0, nanos: 40_000_000 } } });
    const held = Object.entries(await r.leases());
    expect(held).toHaveLength(1);
    const [id, v] = held[0] as [string, string];
    expect(id).toBe("q|s1.1.1");
    // rate 25/s of R 100 = 250,000 ppm (half the slice), burst 1 (a twentieth of a second, at least one token) inside it.
    expect(v).toMatch(/^0:\d+:250000:1$/);
    r.call.write({ domain: "d", bucket_quota_usages: [usage(7, 2)] });
    await expect.poll(() => r.reports).toEqual([{ allowed: 7, denied: 2 }]);
    r.call.end();
    const last = await r.next(2);
    expect(last.bucket_action).toMatchObject([{ bucket_id: bucket, abandon_action: {} }]);
    expect((await r.ended).code).toBe(grpc.status.OK);
    // The reservation stays: the proxy may not have seen the abandon.
    expect(Object.keys(await r.leases())).toEqual(["q|s1.1.1"]);
  } finally {
    await r.stop();
  }
});

it("an assignment is renewed before its TTL runs out, as a fresh reservation", async () => {
  const r = await rig({ assignmentTtlMs: 400, deliveryMarginMs: 50, renewBeforeMs: 150 });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    const second = await r.next(2);
    expect(second.bucket_action[0]).toMatchObject({
      quota_assignment_action: { rate_limit_strategy: { token_bucket: { max_tokens: 1 } } },
    });
    const ids = Object.keys(await r.leases()).sort();
    expect(ids).toContain("q|s2.1.2");
  } finally {
    await r.stop();
  }
});

it("a renewal is sized from the proxy's reported demand and names the assignment it renews", async () => {
  const r = await rig({ assignmentTtlMs: 600, deliveryMarginMs: 50, renewBeforeMs: 200 });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    // 2 requests in 200 ms: 10/s, asked with 25% headroom; the burst is the rate's share of C.
    r.call.write({ domain: "d", bucket_quota_usages: [usage(2, 0)] });
    await r.next(2);
    expect(r.asks[0]).toEqual({ id: `s${n}.1.1`, rate: 25, burst: 1 });
    expect(r.asks[1]).toEqual({ id: `s${n}.1.2`, rate: 12.5, burst: 1, supersedes: `s${n}.1.1` });
    const a = r.got[1]?.bucket_action[0];
    expect(a).toMatchObject({
      quota_assignment_action: { rate_limit_strategy: { token_bucket: { max_tokens: 1 } } },
    });
  } finally {
    await r.stop();
  }
});

it("a proxy that denies gets a bigger assignment at once, not at the renewal", async () => {
  const r = await rig({ assignmentTtlMs: 2000, deliveryMarginMs: 50, renewBeforeMs: 200, minReassignMs: 0 });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    // 15 requests in 200 ms, 10 of them denied: 75/s wanted against 25/s held.
    r.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
    const m = await r.next(2);
    // Asked: the demand with headroom (93.75/s), capped at 95% of the region's share (47.5/s).
    expect(r.asks[1]).toMatchObject({ rate: 0.95 * 50, supersedes: `s${n}.1.1` });
    const tb = (m.bucket_action[0] as { quota_assignment_action: { rate_limit_strategy: unknown } })
      .quota_assignment_action.rate_limit_strategy as { token_bucket: { fill_interval: { nanos: number } } };
    // More than the 25/s it held (one token every 40 ms): the rate of the assignment it renews is
    // reused, so it gets the slice's 50/s less what backs the old bucket's 1-token burst (49/s).
    expect(tb.token_bucket.fill_interval.nanos).toBeLessThan(40_000_000);
  } finally {
    await r.stop();
  }
});

it("two proxies on one key divide the region's share by their demand: the first to ask does not keep all", async () => {
  const r = await rig({ assignmentTtlMs: 600, deliveryMarginMs: 50, renewBeforeMs: 200, minReassignMs: 0 });
  try {
    const b = r.stream();
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    b.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await b.next(1);
    // Both over-demand equally (75/s each against a slice of 50/s), reporting every 200 ms. The
    // first to push may get most of the slice, but each ask is capped at its part of 95% of the
    // region's share by demand (0.95 · 50/s · ½), so within a few renewals they hold halves.
    for (let k = 0; k < 10; k++) {
      r.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      b.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      await new Promise((res) => setTimeout(res, 200));
    }
    const last = (stream: string) => r.asks.filter((a) => a.id.startsWith(`s${n}.${stream}.`)).at(-1);
    expect(last("1")?.rate).toBeCloseTo(0.95 * 50 * 0.5, 6);
    expect(last("2")?.rate).toBeCloseTo(0.95 * 50 * 0.5, 6);
    const lastRate = (got: readonly RlqsResponse[]) => {
      const tb = got
        .flatMap((m) => m.bucket_action)
        .map((a) =>
          "quota_assignment_action" in a ? a.quota_assignment_action.rate_limit_strategy : undefined,
        )
        .filter((x) => x !== undefined && "token_bucket" in x)
        .at(-1) as { token_bucket: { fill_interval: { seconds: number; nanos: number } } };
      const f = tb.token_bucket.fill_interval;
      return 1 / (Number(f.seconds) + f.nanos / 1e9);
    };
    // Each holds close to its half (the fit may leave a token's worth for the other's burst).
    expect(lastRate(r.got)).toBeGreaterThan(20);
    expect(lastRate(b.got)).toBeGreaterThan(20);
    b.call.end();
  } finally {
    await r.stop();
  }
});

it("a renewal that cannot be reserved leaves the proxy its live assignment and is tried again soon", async () => {
  const r = await rig({ assignmentTtlMs: 600, deliveryMarginMs: 50, renewBeforeMs: 200 });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    // The renewal (at 400 ms) and its retries are refused until 550 ms: nothing is sent while the
    // assignment is live (a DENY_ALL would end it early), then the next retry gets one.
    r.control.refuse = true;
    await new Promise((res) => setTimeout(res, 550));
    expect(r.got).toHaveLength(1);
    expect(r.asks.length).toBeGreaterThan(2);
    r.control.refuse = false;
    const m = await r.next(2);
    expect(m.bucket_action[0]).toMatchObject({
      quota_assignment_action: { rate_limit_strategy: { token_bucket: {} } },
    });
  } finally {
    await r.stop();
  }
});

it("a report sent just before the proxy half-closes is counted, then the buckets are abandoned", async () => {
  // The first report's reservation is slow, so the second report and the half-close arrive while
  // it is in flight: both wait their turn, and the final usage is still counted.
  const r = await rig({}, 150);
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    r.call.write({ domain: "d", bucket_quota_usages: [usage(3, 1)] });
    r.call.end();
    expect((await r.ended).code).toBe(grpc.status.OK);
    expect(r.reports).toEqual([{ allowed: 3, denied: 1 }]);
    // The assignment went out before the abandon (the reports came first).
    expect(r.got.map((x) => x.bucket_action)).toMatchObject([
      [{ quota_assignment_action: {} }],
      [{ bucket_id: bucket, abandon_action: {} }],
    ]);
  } finally {
    await r.stop();
  }
});

it("a deny-listed bucket gets DENY_ALL; shutdown abandons every bucket", async () => {
  const r = await rig({});
  try {
    const deny = { bucket: [{ key: "deny", value: "x" }] };
    r.call.write({
      domain: "d",
      bucket_quota_usages: [
        { bucket_id: deny, time_elapsed: null, num_requests_allowed: 0, num_requests_denied: 0 },
      ],
    });
    const m = await r.next(1);
    expect(m.bucket_action[0]).toMatchObject({
      bucket_id: deny,
      quota_assignment_action: { rate_limit_strategy: { blanket_rule: "DENY_ALL" } },
    });
    r.svc.shutdown();
    expect((await r.ended).code).toBe(grpc.status.OK);
    // Before the stream ended, every bucket was abandoned.
    expect(r.got.map((x) => x.bucket_action)).toMatchObject([
      [{ quota_assignment_action: {} }],
      [{ bucket_id: deny, abandon_action: {} }],
    ]);
  } finally {
    await r.stop();
  }
});

it("a first report without a domain fails the stream with INVALID_ARGUMENT", async () => {
  const r = await rig({});
  try {
    r.call.write({ domain: "", bucket_quota_usages: [usage(1, 0)] });
    const st = await r.ended;
    expect(st.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(st.details).toContain("names no domain");
  } finally {
    await r.stop();
  }
});

it("a proxy that stops reporting is not renewed: its share goes to the proxy that reports, and its next report assigns it again", async () => {
  const r = await rig({
    assignmentTtlMs: 400,
    deliveryMarginMs: 50,
    renewBeforeMs: 150,
    minReassignMs: 0,
    silentAfterMs: 600,
  });
  try {
    const b = r.stream();
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    b.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await b.next(1);
    const tick = () => new Promise((res) => setTimeout(res, 200));
    // Both over-demand (75/s each against a slice of 50/s): they hold halves.
    for (let k = 0; k < 5; k++) {
      r.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      b.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      await tick();
    }
    // The first proxy goes silent, its stream open; the second keeps reporting.
    for (let k = 0; k < 5; k++) {
      b.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      await tick();
    }
    const silentGot = r.got.length;
    for (let k = 0; k < 4; k++) {
      b.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      await tick();
    }
    // Nothing more went to the silent proxy (its last assignment ran out), and the other one's
    // asks are no longer halved: it asks for 95% of the region's share.
    expect(r.got.length).toBe(silentGot);
    const last = (stream: string) => r.asks.filter((a) => a.id.startsWith(`s${n}.${stream}.`)).at(-1);
    expect(last("2")?.rate).toBeCloseTo(0.95 * 50, 6);
    // Its next report is answered at once (a DENY_ALL while the other holds the share), and as
    // both report the split is halved again: within a few renewals it holds a token bucket.
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 3)] });
    await r.next(silentGot + 1);
    const tokenBucket = () =>
      r.got
        .slice(silentGot)
        .flatMap((m) => m.bucket_action)
        .some(
          (a) =>
            "quota_assignment_action" in a && "token_bucket" in a.quota_assignment_action.rate_limit_strategy,
        );
    for (let k = 0; k < 10 && !tokenBucket(); k++) {
      r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 15)] });
      b.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
      await tick();
    }
    expect(tokenBucket()).toBe(true);
    b.call.end();
  } finally {
    await r.stop();
  }
});

it("a share that grows is pushed at once to a proxy that wants more, with no report asking", async () => {
  const r = await rig({
    assignmentTtlMs: 2500,
    deliveryMarginMs: 50,
    renewBeforeMs: 200,
    minReassignMs: 0,
    silentAfterMs: 10_000,
  });
  try {
    r.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await r.next(1);
    // 75/s wanted: pushed up to 95% of the region's share (47.5/s of its 50/s).
    r.call.write({ domain: "d", bucket_quota_usages: [usage(5, 10)] });
    await r.next(2);
    expect(r.asks[1]).toMatchObject({ rate: 0.95 * 50 });
    // The region borrows 400,000 ppm (its share 90%); the proxy reports nothing more. Another
    // proxy's first reservation on the key sees the grown share, and the first proxy is pushed
    // a bigger assignment then (its renewal is 2 s away).
    const [sec, usec] = await redis.time();
    const deadline = Number(sec) * 1e6 + Number(usec) + 2_900_000;
    const a = args(r.policy);
    await bindScripts(redis).call("loanMerge", a.keys, ["eu", 1, "us", 400_000, deadline, 1, 0]);
    // The borrowed capacity fills at the key's rate: the bursts need whole tokens in the bucket.
    await new Promise((res) => setTimeout(res, 300));
    const b = r.stream();
    const t0 = performance.now();
    b.call.write({ domain: "d", bucket_quota_usages: [usage(0, 0)] });
    await b.next(1);
    const m = await r.next(3);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(r.asks[3]).toMatchObject({ supersedes: `s${n}.1.2` });
    expect(r.asks[3]?.rate).toBeGreaterThan(0.95 * 50 * 1.1);
    const tb = (m.bucket_action[0] as { quota_assignment_action: { rate_limit_strategy: unknown } })
      .quota_assignment_action.rate_limit_strategy as { token_bucket: { fill_interval: { nanos: number } } };
    // More than the 47.5/s it held (a token every ~21 ms).
    expect(tb.token_bucket.fill_interval.nanos).toBeLessThan(20_000_000);
    b.call.end();
  } finally {
    await r.stop();
  }
});
