// The real demo, as a user runs it: `geoquota demo` in a child process against
// a real local cluster (redis-server, limiter and gossip processes), scenario
// shift for 20 s, then stream for 20 s (WebSocket servers and flood clients in
// the demo process). Asserts the exit code, the summary lines, the report pair,
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

interface DemoRun {
  readonly code: number | null;
  readonly out: string;
  readonly err: string;
  /** Every descendant process seen while the demo ran. */
  readonly procs: Proc[];
}

/** Runs `geoquota demo …args` in a child process, watching its descendants twice a second. */
async function runDemoChild(args: readonly string[]): Promise<DemoRun> {
  const child = spawn(process.execPath, [bin, "demo", ...args], { stdio: ["ignore", "pipe", "pipe"] });
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
  return { code, out, err, procs: [...seen.values()] };
}

function expectExit0(r: DemoRun): void {
  expect({ code: r.code, tail: r.code === 0 ? "" : `${r.out.slice(-3000)}\n${r.err.slice(-3000)}` }).toEqual({
    code: 0,
    tail: "",
  });
}

/** redis-server ×3, limiter ×3, gossip ×3 at least were seen, and none survives the demo. */
async function expectNothingLeft(procs: readonly Proc[]): Promise<void> {
  expect(procs.filter((p) => /redis-server/.test(p.cmd)).length).toBe(3);
  expect(procs.filter((p) => /geoquota\.mjs (region|gossip)/.test(p.cmd)).map((p) => p.cmd)).toHaveLength(6);
  // Helpers such as tsx's esbuild service exit when their parent does: allow them a moment.
  for (let i = 0; i < 20 && procs.some(stillRunning); i++) await new Promise((r) => setTimeout(r, 250));
  expect(procs.filter(stillRunning).map((p) => `${p.pid} ${p.cmd}`)).toEqual([]);
}

describe("geoquota demo (real cluster)", () => {
  let dir = "";
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs shift for 20 s: bound held, utilization printed, report written, nothing left behind", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-int-"));
    const report = join(dir, "out", "demo.html");
    const r = await runDemoChild([
      "--duration",
      "20s",
      "--no-tty",
      "--scenario",
      "shift",
      "--report",
      report,
    ]);
    expectExit0(r);
    const out = r.out;
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
    await expectNothingLeft(r.procs);
  }, 120_000); // the demo is 20 s; starting 9 processes on a loaded machine can take as long

  it("runs stream for 20 s: both bounds held, the tenant slowed to its byte rate, nothing left behind", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-int-"));
    const report = join(dir, "out", "demo.html");
    const r = await runDemoChild([
      "--scenario",
      "stream",
      "--duration",
      "20s",
      "--no-tty",
      "--report",
      report,
    ]);
    expectExit0(r);
    const out = r.out;
    expect(out).toMatch(/^global bound held: admitted \d+ ≤ bound \d+\.\d\d$/m);
    expect(out).toMatch(/^stream bound held: admitted \d+ B ≤ bound \d+\.\d\d B$/m);
    const rate =
      /^stream rate: (\d+) B\/s of r = (\d+) B\/s = ([\d.]+)% while each of 3 clients offered 10× r/m.exec(
        out,
      );
    expect(rate, out.slice(-3000)).not.toBeNull();
    // Slowed to the rate: the clients offered 30× r together; what got through is about r, never far above.
    // The floor only says the stream was not stalled: at load 38 (the whole suite under stress-ng
    // beside other jobs) 23% of r got through, which the old floor of 30% called a failure.
    expect(Number(rate![3])).toBeLessThanOrEqual(110);
    expect(Number(rate![3])).toBeGreaterThan(10);
    // The live line shows streamed bytes/s and paused connections per region.
    expect(out).toMatch(
      /^\[ {2}\d+s\] stream \| .* \| stream us-east=\d+KiB\/s share=[\d.?]+%? paused=\d\/\d eu-west=/m,
    );
    const html = readFileSync(report, "utf8");
    expect(html).toContain("stream bound held");
    expect(html).toContain("Streamed KiB/s per region");
    const json = JSON.parse(readFileSync(join(dir, "out", "demo.json"), "utf8"));
    expect(json.streamFrames.rows.length).toBeGreaterThan(100);
    await expectNothingLeft(r.procs);
  }, 120_000);
});
