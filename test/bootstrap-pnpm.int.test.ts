// The bootstrap's pnpm step on a machine like a fresh one of this kind:
// `/usr/bin/pnpm` is corepack's shim, corepack cannot verify its download, and
// `npm install -g` fails with EEXIST on the shim. A fake PATH reproduces all
// three; the step must still produce the pinned pnpm (under .bin/pnpm, no
// global state) and, when npm itself fails, print npm's own message.
import { execFile } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const pinned = (
  JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { packageManager: string }
).packageManager.split("@")[1] as string;

const corepackError =
  "Internal Error: Error when performing the request to https://registry.npmjs.org/pnpm; " +
  "No compatible signature found in package metadata";

function fakeMachine(npmBehaviour: "eexist-on-global" | "always-fails"): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), "gq-boot-"));
  // A project root with just what the step reads.
  mkdirSync(join(dir, "scripts", "lib"), { recursive: true });
  copyFileSync(join(root, "package.json"), join(dir, "package.json"));
  copyFileSync(join(root, "scripts", "lib", "pnpm.sh"), join(dir, "scripts", "lib", "pnpm.sh"));
  const bin = join(dir, "fakebin");
  mkdirSync(bin);
  const script = (name: string, body: string) => {
    writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  // corepack's shim and corepack itself, both unable to download.
  script("pnpm", `echo "${corepackError}" >&2; exit 1`);
  script("corepack", `echo "${corepackError}" >&2; exit 1`);
  const realNpm = process.env.GQ_REAL_NPM ?? "/usr/bin/npm";
  script(
    "npm",
    npmBehaviour === "always-fails"
      ? `echo "npm error code E403 npm error 403 Forbidden - GET https://registry.npmjs.org/pnpm" >&2; exit 1`
      : `for a in "$@"; do case "$a" in -g|--global) echo "npm error code EEXIST" >&2; echo "npm error path /usr/bin/pnpm" >&2; exit 1;; esac; done\nexec ${realNpm} "$@"`,
  );
  symlinkSync(process.execPath, join(bin, "node"));
  return { dir, path: `${bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin` };
}

function runStep(dir: string, path: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      "bash",
      ["-c", "source scripts/lib/pnpm.sh && gq_ensure_pnpm && command -v pnpm && pnpm --version"],
      { cwd: dir, env: { ...process.env, PATH: path }, timeout: 240_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("bootstrap: pnpm on a machine with corepack's shim", () => {
  it("installs the pinned pnpm under .bin/pnpm and puts it first on PATH", async () => {
    const { dir, path } = fakeMachine("eexist-on-global");
    const r = await runStep(dir, path);
    expect(r.stderr).not.toContain("error:");
    expect(r.code).toBe(0);
    const [where, version] = r.stdout.trim().split("\n");
    expect(where).toBe(join(dir, ".bin", "pnpm", "node_modules", ".bin", "pnpm"));
    expect(version).toBe(pinned);
    // Idempotent: a second run finds it and installs nothing.
    const again = await runStep(dir, path);
    expect(again.code).toBe(0);
    expect(again.stderr).not.toContain("installing");
  }, 300_000);

  it("prints npm's and the shim's own messages when nothing works", async () => {
    const { dir, path } = fakeMachine("always-fails");
    const r = await runStep(dir, path);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("E403");
    expect(r.stderr).toContain("No compatible signature found");
    expect(r.stderr).toMatch(new RegExp(`could not install pnpm@${pinned.replaceAll(".", "\\.")}`));
  }, 120_000);
});
