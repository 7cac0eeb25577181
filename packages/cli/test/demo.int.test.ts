// The real demo, as a user runs it: `geoquota demo` in a child process against
// a real local cluster (redis-server, limiter and gossip processes), scenario
// shift for 20 s. Asserts the exit code, the summary line, the report pair,
// and that no process the demo started outlives it.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const bin = fileURLToPath(new URL("../bin/geoquota.mjs", import.meta.url));

interface Proc {
  readonly pid: number;
  /** Start time (clock ticks since boot): with the pid, names the process even if the pid is reused. */
  readonly start: string;
  readonly cmd: string;
}

function readProc(pid: number): (Proc & { ppid: number }) | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the ")" that closes the command name: state, ppid, …, starttime (field 22).
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    return { pid, ppid: Number(rest[1]), start: rest[19] ?? "", cmd };
  } catch {
    return undefined; // the process ended while we looked
  }
}

/** Every live descendant of `root` (Linux /proc). */
function descendants(root: number): Proc[] {
  const all = readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .flatMap((n) => readProc(Number(n)) ?? []);
  const out: Proc[] = [];
  const walk = (p: number) => {
    for (const x of all)
      if (x.ppid === p) {
        out.push(x);
        walk(x.pid);
      }
  };
  walk(root);
  return out;
}

function stillRunning(p: Proc): boolean {
  return readProc(p.pid)?.start === p.start;
}

describe("geoquota demo (real cluster)", () => {
  let dir = "";
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs shift for 20 s: bound held, utilization printed, report written, nothing left behind", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-int-"));
    const report = join(dir, "out", "demo.html");
    const child = spawn(
      process.execPath,
      [bin, "demo", "--duration", "20s", "--no-tty", "--scenario", "shift", "--report", report],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")));
    const seen = new Map<string, Proc>();
    const watch = setInterval(() => {
      for (const p of descendants(child.pid!)) {
        // Keep the command line read after exec (not the forked parent's), and
        // never replace it with the empty one of an exiting process.
        const k = `${p.pid}/${p.start}`;
        if (p.cmd !== "" || !seen.has(k)) seen.set(k, p);
      }
    }, 500);
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    clearInterval(watch);
    expect({ code, tail: code === 0 ? "" : `${out.slice(-3000)}\n${err.slice(-3000)}` }).toEqual({
      code: 0,
      tail: "",
    });
    expect(out).toMatch(/^global bound held: admitted \d+ ≤ bound \d+\.\d\d$/m);
    expect(out).toMatch(/^utilization during shift \(demand all in us-east\): admitted [\d.]+\/s/m);
    expect(out).toMatch(/^\[ {2}\d+s\] shift \| us-east share=/m); // one plain line per second
    expect(existsSync(report)).toBe(true);
    const html = readFileSync(report, "utf8");
    expect(html).toContain("global bound held");
    expect(html).not.toMatch(/https?:\/\//);
    const json = JSON.parse(readFileSync(join(dir, "out", "demo.json"), "utf8"));
    expect(json.requests.rows.length).toBeGreaterThan(1000);
    expect(json.shares.tMs.length).toBeGreaterThan(10);
    // redis-server ×3, limiter ×3, gossip ×3 at least were seen, and none survives the demo
    // (helpers such as tsx's esbuild service exit when their parent does: allow them a moment).
    const procs = [...seen.values()];
    expect(procs.filter((p) => /redis-server/.test(p.cmd)).length).toBe(3);
    expect(procs.filter((p) => /geoquota\.mjs (region|gossip)/.test(p.cmd)).map((p) => p.cmd)).toHaveLength(
      6,
    );
    for (let i = 0; i < 20 && procs.some(stillRunning); i++) await new Promise((r) => setTimeout(r, 250));
    expect(procs.filter(stillRunning).map((p) => `${p.pid} ${p.cmd}`)).toEqual([]);
  }, 120_000); // the demo is 20 s; starting 9 processes on a loaded machine can take as long
});
