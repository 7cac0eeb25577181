// The packages as a user gets them: `pnpm pack` of every workspace package
// (workspace:* becomes the version), installed into an empty directory, then
//   - the limiter library, imported by a plain ESM script, serves checks
//     against a real redis-server (Lua loaded from inside the @geoquota/redis tarball);
//   - the CLI's `geoquota region --config F` from the installed bin (built JS,
//     bundled per command, no tsx) answers POST /v1/check.
// Needs the build (scripts/build.sh, run by the README's test command first).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const packages = readdirSync(join(root, "packages")).sort();

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 180_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

describe("packed tarballs install into an empty directory and work", () => {
  const work = mkdtempSync(join(tmpdir(), "gq-pack-"));
  const packs = join(work, "packs");
  const consumer = join(work, "consumer");
  let redis: RedisServer;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    for (const p of packages) {
      if (!existsSync(join(root, "packages", p, "dist", "index.js")))
        throw new Error(`packages/${p}/dist missing: run scripts/build.sh (the test command does)`);
      await run("pnpm", ["pack", "--pack-destination", packs], join(root, "packages", p));
    }
    const tarball = (p: string) =>
      `file:${join(packs, readdirSync(packs).find((f) => f.startsWith(`geoquota-${p}-`)) ?? p)}`;
    mkdirSync(consumer);
    writeFileSync(
      join(consumer, "package.json"),
      JSON.stringify({
        name: "consumer",
        private: true,
        type: "module",
        // ioredis is what the user's own code connects with (the same pinned version).
        dependencies: {
          "@geoquota/limiter": tarball("limiter"),
          "@geoquota/cli": tarball("cli"),
          ioredis: "6.0.0",
        },
      }),
    );
    // Every @geoquota/* dependency of the tarballs comes from its tarball, not the registry.
    const overrides = packages.map((p) => `  "@geoquota/${p}": "${tarball(p)}"`).join("\n");
    writeFileSync(
      join(consumer, "pnpm-workspace.yaml"),
      `overrides:\n${overrides}\n  light-my-request: 6.6.0\n`,
    );
    // --offline: every third-party package is already in pnpm's store (the
    // bootstrap installed the workspace), so the test needs no network.
    await run("pnpm", ["install", "--offline", "--reporter=append-only"], consumer);
    redis = await startRedis();
  }, 600_000);

  afterAll(async () => {
    child?.kill("SIGKILL");
    await redis?.stop();
  });

  it("the tarballs hold built JS, declarations and the Lua, and no TypeScript runner", () => {
    const limiter = join(consumer, "node_modules", "@geoquota", "limiter");
    expect(existsSync(join(limiter, "dist", "index.js"))).toBe(true);
    expect(existsSync(join(limiter, "dist", "index.d.ts"))).toBe(true);
    // The Lua ships in @geoquota/redis (the limiter's dependency), the one package that loads it.
    const store = join(consumer, "node_modules", ".pnpm");
    const redisDir = readdirSync(store).find((d) => d.startsWith("@geoquota+redis@")) ?? "@geoquota+redis@?";
    const redisPkg = join(store, redisDir, "node_modules", "@geoquota", "redis");
    for (const f of readdirSync(join(root, "lua"))) expect(existsSync(join(redisPkg, "lua", f))).toBe(true);
    for (const f of readdirSync(join(root, "lua", "lib")))
      expect(existsSync(join(redisPkg, "lua", "lib", f))).toBe(true);
    const cli = JSON.parse(
      readFileSync(join(consumer, "node_modules", "@geoquota", "cli", "package.json"), "utf8"),
    );
    expect(Object.keys(cli.dependencies)).not.toContain("tsx");
    // The bin runs the bundled commands (scripts/bundle.mjs), as in the repository.
    const bundle = join(consumer, "node_modules", "@geoquota", "cli", "dist", "bundle");
    for (const f of ["main.js", "commands/region.js", "commands/gossip.js", "commands/cluster.js"])
      expect(existsSync(join(bundle, f))).toBe(true);
  });

  it("the CLI installs without the test kit (its process spawners come from @geoquota/procs)", () => {
    const installed = readdirSync(join(consumer, "node_modules", ".pnpm"));
    expect(installed.some((d) => d.startsWith("@geoquota+procs@"))).toBe(true);
    expect(installed.filter((d) => d.startsWith("@geoquota+testkit@"))).toEqual([]);
  });

  it("the library decides checks on a real Redis", async () => {
    writeFileSync(
      join(consumer, "check.mjs"),
      `import { Redis } from "ioredis";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
const redis = new Redis(process.argv[2]);
await initFreshRegion(redis);
const store = createRedisStore({ redis, region: "solo", timing: { epsilonUs: 250000, loanDurationUs: 3000000 } });
const policy = { tenant: "t", resource: "r", baseShare: 1000000, floorShare: 20000,
  limit: { algorithm: "token_bucket", capacity: 3, refillPerSecond: 0.001 } };
const out = [];
for (let i = 0; i < 5; i++) out.push((await store.check(policy, 1)).allowed);
console.log(JSON.stringify(out));
await store.close(); redis.disconnect();`,
    );
    const out = await run(process.execPath, ["check.mjs", redis.url], consumer);
    expect(JSON.parse(out.trim())).toEqual([true, true, true, false, false]);
  });

  it("the installed CLI runs a region service that answers POST /v1/check", async () => {
    const port = await freePort();
    writeFileSync(
      join(consumer, "policies.json"),
      JSON.stringify({
        default: { algorithm: "token_bucket", capacity: 2, refillPerSecond: 0.001 },
        policies: [],
      }),
    );
    const cfg = JSON.parse(readFileSync(join(root, "regions", "us-east.json"), "utf8"));
    cfg.listen = { host: "127.0.0.1", port };
    cfg.redis.url = redis.url;
    cfg.regions = [{ id: "us-east", gossip: "127.0.0.1:1" }];
    cfg.policiesFile = "policies.json";
    writeFileSync(join(consumer, "region.json"), JSON.stringify(cfg));
    const bin = join(consumer, "node_modules", ".bin", "geoquota");
    child = spawn(bin, ["region", "--config", join(consumer, "region.json")], {
      cwd: consumer,
      stdio: "ignore",
    });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error("installed region service never became healthy");
      await new Promise((r) => setTimeout(r, 200));
    }
    const check = () =>
      fetch(`${url}/v1/check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ tenant: "acme", resource: "api" }),
      }).then((r) => r.status);
    // The same Redis was initialised fresh by the previous test: the bucket starts full (2 tokens).
    expect([await check(), await check(), await check()]).toEqual([200, 200, 429]);
  }, 120_000);
});
