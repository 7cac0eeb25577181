import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { waitFor } from "../src/index.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("no orphan processes", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`a test process interrupted with ${signal} takes its redis-server with it`, async () => {
      const fixture = fileURLToPath(new URL("./fixtures/holds-redis.ts", import.meta.url));
      const child = spawn(process.execPath, ["--import", "tsx", fixture], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (c: Buffer) => {
        out += c.toString();
      });
      child.stderr.on("data", (c: Buffer) => {
        out += c.toString();
      });
      await waitFor("the fixture to report its redis pid", () => /^\d+\n/.test(out), 20_000);
      const redisPid = Number(out.split("\n")[0]);
      expect(alive(redisPid)).toBe(true);
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      await exited;
      await waitFor(`redis-server ${redisPid} to be gone`, () => !alive(redisPid), 5000);
      expect(alive(redisPid)).toBe(false);
    });
  }
});
