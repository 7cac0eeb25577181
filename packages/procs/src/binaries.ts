import { accessSync, constants } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Repo root, found from this file's location (packages/procs/src or dist). */
export const repoRoot = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

const BINARIES = {
  "redis-server": {
    env: "GQ_REDIS_SERVER",
    fix: "install Debian's redis-server (apt-get install -y redis-server) or run `bash scripts/bootstrap.sh`",
  },
  "toxiproxy-server": {
    env: "GQ_TOXIPROXY_SERVER",
    fix: "run `bash scripts/bootstrap.sh` (builds it with `go install github.com/Shopify/toxiproxy/v2/cmd/server`)",
  },
  nginx: {
    env: "GQ_NGINX",
    fix: "install Debian's nginx (apt-get install -y nginx) or run `bash scripts/bootstrap.sh`",
  },
} as const;

/**
 * Locates a server binary: an explicit environment variable, the project's
 * git-ignored `.bin/` (where scripts/bootstrap.sh builds Toxiproxy), then PATH
 * (and /usr/sbin, where Debian puts nginx, off a normal user's PATH).
 * A missing binary is an error that names the fix, never a skipped test.
 */
export function findBinary(name: keyof typeof BINARIES): string {
  const { env: envName, fix } = BINARIES[name];
  const candidates = [
    process.env[envName],
    join(repoRoot, ".bin", name),
    onPath(name),
    join("/usr/sbin", name),
  ];
  for (const c of candidates) if (c && executable(c)) return c;
  throw new Error(`${name} not found (looked at $${envName}, ${join(repoRoot, ".bin")}, PATH): ${fix}`);
}
