// The peers the `peers` section runs beside geoquota, built from their Go
// modules into the project's .bin/ the first time that section runs (never by
// scripts/bootstrap.sh: the Go builds take minutes of CPU and only this
// section needs them). A peer that cannot be built is reported, not thrown:
// the section says so in its table and measures the others.
import { execFile } from "node:child_process";
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "@geoquota/procs";

export type PeerName = "gubernator" | "envoy-ratelimit";

export interface PeerModule {
  /** The main package, for `go install PKG@VERSION`. */
  readonly pkg: string;
  /** Pinned: v2.13.0 is gubernator's newest release that builds on go1.26 (v2.21.0 needs go1.27). */
  readonly version: string;
  /** The binary `go install` writes (the main package's last path element). */
  readonly goBinary: string;
  /** Environment variable naming a prebuilt binary instead. */
  readonly env: string;
}

export const PEER_MODULES: Readonly<Record<PeerName, PeerModule>> = {
  gubernator: {
    pkg: "github.com/gubernator-io/gubernator/v2/cmd/gubernator",
    version: "v2.13.0",
    goBinary: "gubernator",
    env: "GQ_GUBERNATOR",
  },
  "envoy-ratelimit": {
    // No release tag since v1.4.0 (2019, pre-modules); the main branch's pseudo-version, go 1.25.6.
    pkg: "github.com/envoyproxy/ratelimit/src/service_cmd",
    version: "v1.4.1-0.20260122083618-3fb702589d36",
    goBinary: "service_cmd",
    env: "GQ_ENVOY_RATELIMIT",
  },
};

export type PeerBinary =
  | { readonly ok: true; readonly path: string; readonly built: boolean }
  | { readonly ok: false; readonly error: string };

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The last lines of a build's output: where Go says what failed. */
function tail(text: string, lines = 8): string {
  return text.trim().split("\n").slice(-lines).join("\n");
}

export interface EnsurePeerOptions {
  /** Where the binary lives (default: the repo's .bin/). */
  readonly binDir?: string;
  /** The `go` command (default: `go` on PATH). */
  readonly go?: string;
  /** A build that takes longer is stopped and reported (default 15 min). */
  readonly timeoutMs?: number;
}

/**
 * The peer's binary: `$GQ_…` when set, else `.bin/<name>`, built there with
 * `go install` when missing. Never throws: a failure comes back as
 * `{ ok: false, error }` naming the module, the version and what Go said.
 */
export async function ensurePeer(name: PeerName, o: EnsurePeerOptions = {}): Promise<PeerBinary> {
  const m = PEER_MODULES[name];
  const fromEnv = process.env[m.env];
  if (fromEnv) {
    return executable(fromEnv)
      ? { ok: true, path: fromEnv, built: false }
      : { ok: false, error: `${m.env}=${fromEnv} is not an executable file` };
  }
  const binDir = o.binDir ?? join(repoRoot, ".bin");
  const target = join(binDir, name);
  if (executable(target)) return { ok: true, path: target, built: false };
  const what = `go install ${m.pkg}@${m.version}`;
  const tmp = mkdtempSync(join(tmpdir(), `geoquota-${name}-`));
  try {
    const output = await new Promise<string | undefined>((resolve) => {
      execFile(
        o.go ?? "go",
        ["install", `${m.pkg}@${m.version}`],
        {
          env: { ...process.env, GOBIN: tmp, GOFLAGS: "-mod=mod" },
          timeout: o.timeoutMs ?? 15 * 60_000,
          maxBuffer: 16 * 1024 * 1024,
        },
        (err, stdout, stderr) => {
          if (!err) return resolve(undefined);
          const code = (err as NodeJS.ErrnoException).code;
          if (code === "ENOENT") return resolve(`the Go toolchain (go) is not on PATH: https://go.dev/dl`);
          if (err.killed) return resolve(`stopped after ${(o.timeoutMs ?? 900_000) / 1000} s`);
          resolve(tail(`${stdout}\n${stderr}`) || err.message);
        },
      );
    });
    if (output !== undefined) return { ok: false, error: `${what} failed: ${output}` };
    const built = join(tmp, m.goBinary);
    if (!executable(built)) return { ok: false, error: `${what} succeeded but wrote no ${m.goBinary}` };
    mkdirSync(binDir, { recursive: true });
    // Copied then renamed: /tmp may be another file system, and a half-copied binary must never look built.
    copyFileSync(built, `${target}.part`);
    chmodSync(`${target}.part`, 0o755);
    renameSync(`${target}.part`, target);
    return { ok: true, path: target, built: true };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
