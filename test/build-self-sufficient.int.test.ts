// `npm run build` on its own, from a shell that has no pnpm on PATH (the
// pinned one lives under .bin/pnpm and only test.sh/demo.sh used to put it
// there): the build must find it itself and succeed.
import { execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

/** PATH without any directory that holds a `pnpm`. */
function pathWithoutPnpm(): string {
  return (process.env.PATH ?? "")
    .split(":")
    .filter((d) => {
      try {
        accessSync(join(d, "pnpm"), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(":");
}

describe("npm run build", () => {
  it("succeeds with no pnpm on PATH (it puts the pinned pnpm there itself)", async () => {
    const PATH = pathWithoutPnpm();
    const r = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        "bash",
        ["-c", "command -v pnpm && exit 97; npm run build"],
        { cwd: root, env: { ...process.env, PATH }, timeout: 240_000 },
        (err, stdout, stderr) => {
          const code = err ? ((err as { code?: number }).code ?? 1) : 0;
          resolve({ code: typeof code === "number" ? code : 1, out: stdout + stderr });
        },
      );
    });
    expect(r.code, "97: a pnpm was still on PATH").not.toBe(97);
    expect(r.out).not.toMatch(/pnpm: command not found/);
    expect(r.code, r.out.slice(-2000)).toBe(0);
  }, 300_000);
});
