// One region, real Redis, real loopback sockets: a client writing as fast as
// it can is held to the tenant's byte and frame rates (exact oracle), frames
// arrive complete and in order, and a paused connection is not read.
import type { RegionStore } from "@geoquota/core";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { checkGlobalBound, type RedisServer, startRedis } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import type { WebSocket } from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ExampleServer, runFloodClient, startExampleServer } from "../src/index.js";
import { Recorder, range, rateAfterBurst, type StreamLimits, sleep, streamPolicies } from "./helpers.js";

const TIMING = { epsilonUs: 250_000, loanDurationUs: 3_000_000 };

let redisServer: RedisServer;
let redis: Redis;
let store: RegionStore;
let server: ExampleServer | undefined;

beforeAll(async () => {
  redisServer = await startRedis();
  redis = redisServer.client();
});

afterAll(async () => {
  await redisServer.stop();
});

async function start(limits: StreamLimits, rec: Recorder): Promise<ExampleServer> {
  await redis.flushall();
  // A fresh Redis: full buckets at the start are what G1 allows (internals.md).
  await initFreshRegion(redis);
  store = createRedisStore({ redis, region: "local", timing: TIMING });
  server = await startExampleServer({
    store,
    policies: streamPolicies(limits),
    regionId: "local",
    connectionShare: 1,
    onFrame: rec.onFrame,
    reportIntervalMs: 0,
  });
  return server;
}

afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("one connection against a real regional bucket", () => {
  it("byte rate binds: admitted ≤ C + r·T exactly, ≥ 90% of r after the burst, no loss or reordering", async () => {
    const limits = {
      bytes: { capacity: 32 * 1024, refillPerSecond: 64 * 1024 },
      frames: { capacity: 10_000, refillPerSecond: 10_000 },
    };
    const rec = new Recorder();
    const s = await start(limits, rec);
    const frameBytes = 1024;
    // Exactly what C + 3 s of refill admits, all written at once.
    const frames = (limits.bytes.capacity + limits.bytes.refillPerSecond * 3) / frameBytes;
    const client = runFloodClient({
      url: s.url,
      tenant: "cust_a",
      frameBytes,
      bytesPerSecond: Number.POSITIVE_INFINITY,
      durationMs: 5000,
      bufferedBytesMax: frames * frameBytes,
      stopAfterFrames: frames,
      doneWhen: () => rec.delivered.length >= frames,
    });
    await waitUntil(() => rec.delivered.length >= frames, 8000);
    await client;
    expect(rec.seqsOf(() => true)).toEqual(range(frames));
    const bytes = checkGlobalBound(rec.admissions("bytes"), limits.bytes);
    expect(bytes.worstExcess).toBeLessThanOrEqual(1e-9);
    expect(bytes.ok).toBe(true);
    expect(checkGlobalBound(rec.admissions("frames"), limits.frames).ok).toBe(true);
    const after = rateAfterBurst(rec.admissions("bytes"), limits.bytes.capacity);
    expect(after.seconds).toBeGreaterThan(2);
    expect(after.perSecond).toBeGreaterThanOrEqual(0.9 * limits.bytes.refillPerSecond);
    // It was paused (held by the tenant's quota) and the metrics saw it.
    const text = await (await fetch(s.metricsUrl)).text();
    expect(text).toMatch(/geoquota_stream_pauses_total\{reason="tenant"\} [1-9]/);
    expect(text).toContain(
      `geoquota_stream_admitted_bytes_total{tenant_class="default"} ${frames * frameBytes}`,
    );
  });

  it("frame rate binds: small frames held to the frame rate, exactly", async () => {
    const limits = {
      bytes: { capacity: 1024 * 1024, refillPerSecond: 1024 * 1024 },
      frames: { capacity: 20, refillPerSecond: 100 },
    };
    const rec = new Recorder();
    const s = await start(limits, rec);
    const frames = limits.frames.capacity + limits.frames.refillPerSecond * 3;
    const client = runFloodClient({
      url: s.url,
      tenant: "cust_b",
      frameBytes: 64,
      bytesPerSecond: Number.POSITIVE_INFINITY,
      durationMs: 5000,
      stopAfterFrames: frames,
      doneWhen: () => rec.delivered.length >= frames,
    });
    await waitUntil(() => rec.delivered.length >= frames, 8000);
    await client;
    expect(rec.seqsOf(() => true)).toEqual(range(frames));
    const v = checkGlobalBound(rec.admissions("frames"), limits.frames);
    expect(v.ok).toBe(true);
    expect(checkGlobalBound(rec.admissions("bytes"), limits.bytes).ok).toBe(true);
    const after = rateAfterBurst(rec.admissions("frames"), limits.frames.capacity);
    expect(after.perSecond).toBeGreaterThanOrEqual(0.9 * limits.frames.refillPerSecond);
  });

  it("a paused connection is not read: the server's bytes stop, the client's buffer grows", async () => {
    const limits = {
      bytes: { capacity: 4096, refillPerSecond: 1024 },
      frames: { capacity: 1000, refillPerSecond: 1000 },
    };
    const rec = new Recorder();
    const s = await start(limits, rec);
    const samples: { t: number; buffered: number }[] = [];
    const client = runFloodClient({
      url: s.url,
      tenant: "cust_c",
      frameBytes: 64 * 1024,
      bytesPerSecond: 16 * 1024 * 1024,
      durationMs: 3000,
      onTick: (t) => samples.push({ t: t.elapsedMs, buffered: t.bufferedAmount }),
    });
    await sleep(1000);
    const serverWs = [...s.wss.clients][0] as WebSocket | undefined;
    expect(serverWs).toBeDefined();
    const sock = (serverWs as unknown as { _socket: import("node:net").Socket })._socket;
    const read1 = sock.bytesRead;
    const buffered1 = samples[samples.length - 1]!.buffered;
    await sleep(1500);
    const read2 = sock.bytesRead;
    const buffered2 = samples[samples.length - 1]!.buffered;
    const conn = s.limiter.openConnections()[0]!;
    const st = conn.stats();
    await client;
    // Nothing read while paused; what was read before is one read plus Node's buffer.
    expect(read2 - read1).toBe(0);
    expect(sock.readableLength).toBeLessThanOrEqual(128 * 1024);
    expect(st.paused).toBe(true);
    expect(st.queuedBytes).toBeLessThanOrEqual(2 * 64 * 1024);
    // The client holds the backlog instead: megabytes more after 1.5 s.
    expect(buffered2 - buffered1).toBeGreaterThan(8 * 1024 * 1024);
    expect(rec.delivered.length).toBe(0); // a 64 KiB frame at 1 KiB/s after a 4 KiB burst
  });
});

async function waitUntil(cond: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out");
    await sleep(20);
  }
}
