// The built CLI (`packages/cli/bin/geoquota.mjs`) as a black box: one run,
// its exit code and what it wrote. Shared by the test files that drive the CLI
// the way an operator does (policy, concurrent edits, the README walkthrough).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "@geoquota/procs";

export interface CliRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** The path of the built CLI's bin script. */
export const cliBin = (): string => join(repoRoot, "packages/cli/bin/geoquota.mjs");

/** Runs `geoquota <args…>` with `env` added to this process's environment; resolves when it exits. */
export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliBin(), ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve({ code: code ?? (signal === null ? -1 : 128), out, err }));
  });
}
