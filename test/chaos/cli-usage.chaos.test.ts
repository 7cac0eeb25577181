// `geoquota chaos` flag handling, through the real bin (no cluster is started
// for a usage error): a bad --scenario, --duration or --soak exits 2 naming the flag.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "@geoquota/testkit";
import { expect, it } from "vitest";

const bin = join(repoRoot, "packages", "cli", "bin", "geoquota.mjs");
const run = (...args: string[]) =>
  spawnSync(process.execPath, [bin, "chaos", ...args], { encoding: "utf8", timeout: 30_000 });

it("rejects an unknown scenario and a too-short duration with exit 2", () => {
  const bad = run("--scenario", "nope");
  expect(bad.status).toBe(2);
  expect(bad.stderr).toContain("--scenario");
  expect(bad.stderr).toContain("flapping");
  const short = run("--duration", "1s");
  expect(short.status).toBe(2);
  expect(short.stderr).toContain("--duration");
}, 60_000);

it("rejects a bad --soak duration, and --soak with --scenario, with exit 2", () => {
  for (const [args, want] of [
    [["--soak", "3x"], "--soak: expected a duration"],
    [["--soak", "10s"], "--soak: expected at least 30s"],
    [["--soak", "1m", "--scenario", "flush"], "not both"],
    [["--report-dir", "x"], "--report-dir: only with --soak"],
  ] as const) {
    const r = run(...args);
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toContain(want);
  }
}, 120_000);
