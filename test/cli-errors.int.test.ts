// Bad input on the command line exits 2 with a message naming the problem:
// unknown flags, out-of-range values, missing or invalid config files.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
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
