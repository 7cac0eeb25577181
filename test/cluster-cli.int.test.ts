// `geoquota cluster --json` as a black box: start it, read its one line, send
// checks to every region, SIGTERM it, and verify that every process it
// started (redis-server, limiters, daemons) is gone.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isLoopback, waitFor } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";

const bin = fileURLToPath(new URL("../packages/cli/bin/geoquota.mjs", import.meta.url));

/** Every descendant pid of `root`, from /proc (Linux). */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parent.set(Number(d), ppid);
    } catch {
      // raced with exit
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [pid, pp] of parent)
      if (pp === p) {
        out.push(pid);
        walk(pid);
      }
  };
  walk(root);
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface ClusterLine {
  regions: Array<{ id: string; url: string; redis: string }>;
  toxiproxy?: { url: string; proxies: string[] };
}

describe("geoquota cluster --json", () => {
  for (const withToxiproxy of [false, true]) {
    it(`starts, serves checks in every region and leaves no process after SIGTERM${withToxiproxy ? " (--toxiproxy)" : ""}`, async () => {
      const args = [bin, "cluster", "--regions", "3", "--json", ...(withToxiproxy ? ["--toxiproxy"] : [])];
      const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (c: Buffer) => {
        out += c.toString();
      });
      child.stderr.on("data", (c: Buffer) => {
        err += c.toString();
      });
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      let spawned: number[] = [];
      try {
        await waitFor("the cluster's JSON line", () => out.includes("\n"), 150_000);
        const lines = out.trim().split("\n");
        expect(lines).toHaveLength(1);
        const line = JSON.parse(lines[0]!) as ClusterLine;
        expect(line.regions.map((r) => r.id)).toEqual(["us-east", "eu-west", "ap-south"]);
        expect(line.toxiproxy !== undefined).toBe(withToxiproxy);
        if (withToxiproxy) expect(line.toxiproxy!.proxies.length).toBeGreaterThanOrEqual(3);
        for (const r of line.regions) {
          expect(isLoopback(new URL(r.url).hostname)).toBe(true);
          expect(isLoopback(new URL(r.redis).hostname)).toBe(true);
          const res = await fetch(`${r.url}/v1/check`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ tenant: "cust_ent_9942", resource: "payments_checkout" }),
          });
          expect(res.status).toBe(200);
          const body = (await res.json()) as { allowed: boolean; region: string };
          expect(body).toMatchObject({ allowed: true, region: r.id });
        }
        spawned = descendants(child.pid!);
        // 3 redis-server + 3 limiters + 3 daemons (+ toxiproxy)
        expect(spawned.length).toBeGreaterThanOrEqual(withToxiproxy ? 10 : 9);
        child.kill("SIGTERM");
        expect(await exited).toBe(0);
        await waitFor(
          "every process of the cluster to be gone",
          () => spawned.every((p) => !alive(p)),
          10_000,
        );
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
        for (const p of spawned) if (alive(p)) process.kill(p, "SIGKILL");
      }
      expect(err).not.toMatch(/Error/);
    }, 240_000);
  }
});
