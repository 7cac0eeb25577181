// Bad input on the command line exits 2 with a message naming the problem:
// unknown flags, out-of-range values, missing or invalid config files.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const bin = fileURLToPath(new URL("../packages/cli/bin/geoquota.mjs", import.meta.url));

function run(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { timeout: 60_000 }, (err, _stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === "number" ? code : 1, stderr });
    });
  });
}

describe("geoquota: bad input exits 2 and names the problem", () => {
  const dir = mkdtempSync(join(tmpdir(), "gq-cli-"));
  const badJson = join(dir, "broken.json");
  writeFileSync(badJson, "{ not json");
  const badField = join(dir, "bad-field.json");
  writeFileSync(badField, JSON.stringify({ region: "us-east", listen: { host: "127.0.0.1", port: "x" } }));

  const cases: Array<[string, string[], RegExp]> = [
    ["an unknown flag", ["demo", "--bogus"], /unknown option '--bogus'/],
    ["an out-of-range value", ["cluster", "--regions", "99"], /--regions: expected 1\.\.16/],
    ["a bad duration", ["demo", "--duration", "soon"], /--duration: expected a duration/],
    ["a missing config file", ["region", "--config", join(dir, "nope.json")], /nope\.json.*cannot read/],
    ["a config that is not JSON", ["gossip", "--config", badJson], /broken\.json.*invalid JSON/],
    ["a config with a bad field", ["region", "--config", badField], /bad-field\.json: listen\.port/],
  ];
  for (const [name, args, message] of cases) {
    it(name, async () => {
      const r = await run(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
    });
  }
});

function runOut(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === "number" ? code : 1, stdout, stderr });
    });
  });
}

describe("geoquota: --version and help", () => {
  it("--version (and -V) prints the CLI package's version and exits 0", async () => {
    const pkg = JSON.parse(
      readFileSync(new URL("../packages/cli/package.json", import.meta.url), "utf8"),
    ) as { version: string };
    for (const flag of ["--version", "-V"]) {
      const r = await runOut([flag]);
      expect(r, r.stderr).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
    }
  });

  it("durations' defaults are shown in the unit a bare number means (seconds), not in ms", async () => {
    for (const [command, shown] of [
      ["demo", "90s"],
      ["chaos", "20s"],
    ] as const) {
      const r = await runOut([command, "--help"]);
      expect(r.code).toBe(0);
      const help = r.stdout.replace(/\s+/g, " ");
      expect(help).toMatch(new RegExp(`--duration <d> .*\\(default: ${shown}\\)`));
      expect(help).not.toMatch(/default: \d{4,}\)/);
      expect(help).toMatch(/a bare number is seconds/);
    }
  });
});
