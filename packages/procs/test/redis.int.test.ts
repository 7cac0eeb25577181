import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis, startRedisServers, type RedisServer } from "../src/index.js";

describe("redis harness", () => {
  let servers: RedisServer[] = [];
  beforeAll(async () => {
    servers = await startRedisServers(3);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it("starts several independent servers on distinct loopback ports", async () => {
    const ports = new Set(servers.map((s) => s.port));
    expect(ports.size).toBe(3);
    for (const [i, s] of servers.entries()) {
      expect(s.host).toBe("127.0.0.1");
      await s.client().set("k", `v${i}`);
    }
    for (const [i, s] of servers.entries()) expect(await s.client().get("k")).toBe(`v${i}`);
  });

  it("runs without persistence", async () => {
    const cfg = (await servers[0]!.client().config("GET", "save")) as string[];
    expect(cfg[1]).toBe("");
  });

  it("restart gives an empty server on the same port (state loss)", async () => {
    const s = await startRedis();
    try {
      await s.client().set("x", "1");
      await s.kill();
      await s.restart();
      expect(await s.client().get("x")).toBeNull();
    } finally {
      await s.stop();
    }
  });
});
