import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis, startToxiproxy, type ToxiproxyServer } from "../src/index.js";

// Smoke tests that prove the Toxiproxy harness against the real server.
describe("toxiproxy harness", () => {
  let redis: RedisServer;
  let toxi: ToxiproxyServer;
  let proxied: Redis;
  let proxyName = "";

  beforeAll(async () => {
    [redis, toxi] = await Promise.all([startRedis(), startToxiproxy()]);
    const { port } = await toxi.proxy("redis", `127.0.0.1:${redis.port}`);
    proxyName = "redis";
    proxied = new Redis({
      host: "127.0.0.1",
      port,
      commandTimeout: 300,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    proxied.on("error", () => {});
    await new Promise<void>((resolve) => proxied.once("ready", () => resolve()));
  });
  afterEach(async () => {
    await toxi.reset();
  });
  afterAll(async () => {
    proxied?.disconnect();
    await Promise.all([redis?.stop(), toxi?.stop()]);
  });

  it("passes traffic through a proxy", async () => {
    await proxied.set("a", "1");
    expect(await redis.client().get("a")).toBe("1");
  });

  it("a timeout toxic black-holes commands; removing it restores service", async () => {
    const proxy = await toxi.api.get(proxyName);
    await proxy.addToxic({
      name: "blackhole",
      type: "timeout",
      stream: "upstream",
      toxicity: 1,
      attributes: { timeout: 0 },
    });
    await expect(proxied.get("a")).rejects.toThrow(/timed out/i);
    await toxi.reset();
    // The black hole may have cost us the connection: wait for ioredis to reconnect.
    const deadline = Date.now() + 10_000;
    let value: string | null = null;
    while (Date.now() < deadline) {
      try {
        value = await proxied.get("a");
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    expect(value).toBe("1");
  });

  it("a latency toxic measurably delays a round-trip", async () => {
    const timeRoundTrip = async () => {
      const t0 = performance.now();
      await proxied.ping();
      return performance.now() - t0;
    };
    const before = await timeRoundTrip();
    const proxy = await toxi.api.get(proxyName);
    await proxy.addToxic({
      name: "wan",
      type: "latency",
      stream: "downstream",
      toxicity: 1,
      attributes: { latency: 120, jitter: 0 },
    });
    const slow = await new Redis({ host: "127.0.0.1", port: Number(proxy.listen.split(":")[1]) });
    try {
      const t0 = performance.now();
      await slow.ping();
      const delayed = performance.now() - t0;
      // The toxic adds 120 ms to the response; a loopback round-trip is far below that.
      expect(delayed).toBeGreaterThanOrEqual(110);
      expect(before).toBeLessThan(delayed);
      const again = await timeRoundTrip();
      expect(again).toBeGreaterThanOrEqual(110);
    } finally {
      slow.disconnect();
    }
  });
});

describe("a stuck Toxiproxy's goroutine dump", () => {
  it("SIGQUIT ends the server and its whole goroutine dump lands in the file", async () => {
    const toxi = await startToxiproxy();
    const dir = mkdtempSync(join(tmpdir(), "gq-toxi-dump-"));
    try {
      await toxi.proxy("p", "127.0.0.1:1");
      const file = join(dir, "goroutines.txt");
      expect(await toxi.dumpGoroutines(file)).toBe(true);
      const dump = readFileSync(file, "utf8");
      expect(dump).toMatch(/^goroutine 1 .*\[chan receive\]/m); // main, waiting: every goroutine is in it
      expect(dump).toContain("SIGQUIT");
      // Gone, so a second dump has nothing to take.
      expect(await toxi.dumpGoroutines(join(dir, "again.txt"))).toBe(false);
    } finally {
      await toxi.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
