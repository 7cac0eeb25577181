import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
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

  it("each server works in its own scratch --dir: a dump.rdb in the cwd is not loaded, the dir goes at stop", async () => {
    // A real dump.rdb holding a key, in a directory that will be the child's cwd.
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "gq-cwd-")));
    try {
      const writer = await startRedis();
      try {
        const c = writer.client();
        await c.set("left-over", "from an earlier run");
        await c.save();
        const wrote = ((await c.config("GET", "dir")) as string[])[1] ?? "";
        copyFileSync(join(wrote, "dump.rdb"), join(cwd, "dump.rdb"));
      } finally {
        await writer.stop();
      }
      expect(existsSync(join(cwd, "dump.rdb")), "the dump to be loaded").toBe(true);
      const fixture = fileURLToPath(new URL("./fixtures/fresh-in-cwd.ts", import.meta.url));
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", fixture, cwd], {
        timeout: 30_000,
      });
      const seen = JSON.parse(stdout.trim()) as {
        keys: number;
        dir: string;
        harnessDir: string;
        dirLeft: boolean;
      };
      expect(seen.keys, "a fresh server is empty").toBe(0);
      expect(seen.dir).not.toBe(cwd);
      // The server's cwd is the harness's scratch dir (as getcwd() reports it: compare the last part).
      expect(basename(seen.dir)).toBe(basename(seen.harnessDir));
      expect(seen.dirLeft, "the scratch dir is removed by stop()").toBe(false);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
