import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { spawnManaged, waitFor } from "../src/index.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("no orphan processes", () => {
  // SIGKILL runs no hook in the test process: the child's parent-death signal
  // (setpriv --pdeathsig, processes.ts) is what ends it.
  for (const signal of ["SIGINT", "SIGTERM", "SIGKILL"] as const) {
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

describe("the parent-death wrapper", () => {
  it("keeps the child's pid and gives a preloaded library to the command only", async () => {
    // A library that cannot be loaded makes ld.so say so once per program
    // that tries: once (the shell), not twice (setpriv as well).
    const proc = spawnManaged("sh", ["-c", 'echo "pid=$$ preload=$LD_PRELOAD"'], {
      LD_PRELOAD: "/nonexistent/geoquota-test-preload.so",
    });
    const { code } = await proc.exited;
    expect(code).toBe(0);
    const out = proc.output();
    expect(out).toContain(`pid=${proc.pid} preload=/nonexistent/geoquota-test-preload.so`);
    expect(out.match(/geoquota-test-preload\.so.*cannot be preloaded/g) ?? []).toHaveLength(1);
  });
});
