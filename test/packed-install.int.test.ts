// The packages as a user gets them: `pnpm pack` of every workspace package
// (workspace:* becomes the version), installed into an empty directory, then
//   - the limiter library, imported by a plain ESM script, serves checks
//     against a real redis-server (Lua loaded from inside the @geoquota/redis tarball);
//   - the CLI's `geoquota region --config F` from the installed bin (built JS,
//     bundled per command, no tsx) answers POST /v1/check.
//   - the library tarballs, installed with npm (not pnpm) into a fresh TypeScript
//     app that registers geoquota's plugin and @fastify/rate-limit side by side
//     (two route options, two FastifyContextConfig augmentations), type-check
//     with tsc and serve one request through each plugin;
//   - the published manifests: ranges for third-party dependencies, fastify a
//     peer of the limiter, no workspace:* left, license/repository/engines, and
//     the CLI without its development-only packages.
// Needs the build (scripts/build.sh, run by the README's test command first).
// npm fetches the third-party packages (versions pinned as in the workspace);
// --prefer-offline takes them from npm's cache when it has them.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const packages = readdirSync(join(root, "packages")).sort();

/**
 * Every third-party package pnpm-lock.yaml resolved to exactly one version: the consumer pins
 * them all. Its install is offline and has no lockfile of its own, so any range would take the
 * newest version the cached registry metadata lists, which the store lacks whenever one was
 * published since the bootstrap's install (ws 8.23.1, then fast-json-stringify 7.3.11 did).
 */
function lockedSingleVersions(): Map<string, string> {
  const lock = readFileSync(new URL("../pnpm-lock.yaml", import.meta.url), "utf8");
  // The last document: pnpm writes the package manager's own lock first.
  const from = lock.lastIndexOf("\npackages:\n");
  const to = lock.lastIndexOf("\nsnapshots:\n");
  if (from < 0 || to < from) throw new Error("pnpm-lock.yaml: no packages/snapshots sections");
  const versions = new Map<string, Set<string>>();
  for (const m of lock.slice(from, to).matchAll(/^ {2}'?(@?[^@\s']+)@(\d+\.\d+\.\d+[^:'(\s]*)'?:$/gm)) {
    const [, name, version] = m as unknown as [string, string, string];
    if (name.startsWith("@geoquota/")) continue;
    const set = versions.get(name) ?? new Set<string>();
    set.add(version);
    versions.set(name, set);
  }
  const out = new Map<string, string>();
  for (const [name, set] of versions) if (set.size === 1) out.set(name, [...set][0] as string);
  return out;
}

/** The root package.json's exact devDependency pin of `name` (what the bootstrap put in the store). */
function rootDevPin(name: string): string {
  const root = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    devDependencies: Record<string, string>;
  };
  const v = root.devDependencies[name];
  if (v === undefined) throw new Error(`root package.json has no devDependency ${name}`);
  return v;
}

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 300_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** A command's exit code and stderr (it is expected to fail). */
function runStatus(cmd: string, args: string[], cwd: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: 240_000 }, (err, _stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === "number" ? err.code : -1;
      resolve({ code, stderr });
    });
  });
}

/** A version the workspace pins (root devDependencies or a package's dependencies), without a range. */
function pinned(name: string): string {
  const manifests = [
    join(root, "package.json"),
    ...packages.map((p) => join(root, "packages", p, "package.json")),
  ];
  for (const f of manifests) {
    const m = JSON.parse(readFileSync(f, "utf8"));
    const v = m.devDependencies?.[name] ?? m.dependencies?.[name];
    if (typeof v === "string" && !v.startsWith("workspace:")) return v.replace(/^[\^~]/, "");
  }
  throw new Error(`no pinned version of ${name} in the workspace`);
}

/** Packs every workspace package into `dest` (pnpm pack rewrites workspace:* to the version). */
async function packInto(dest: string): Promise<(p: string) => string> {
  for (const p of packages) {
    if (!existsSync(join(root, "packages", p, "dist", "index.js")))
      throw new Error(`packages/${p}/dist missing: run scripts/build.sh (the test command does)`);
    await run("pnpm", ["pack", "--pack-destination", dest], join(root, "packages", p));
  }
  return (p: string) => join(dest, readdirSync(dest).find((f) => f.startsWith(`geoquota-${p}-`)) ?? p);
}

let packed: Promise<(p: string) => string> | undefined;
/** The tarballs, packed once for both consumers. */
const packAll = () => {
  packed ??= packInto(mkdtempSync(join(tmpdir(), "gq-packs-")));
  return packed;
};

describe("packed tarballs install into an empty directory and work", () => {
  const work = mkdtempSync(join(tmpdir(), "gq-pack-"));
  const consumer = join(work, "consumer");
  let redis: RedisServer;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    const file = await packAll();
    const tarball = (p: string) => `file:${file(p)}`;
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
      // @types/node: a transitive "*"/">=" range (protobufjs) would pick the registry's
      // newest, which the store lacks offline; the workspace's own pin is in it.
      `overrides:\n${overrides}\n  "@types/node": ${rootDevPin("@types/node")}\n` +
        // Every transitive range pinned to the lockfile's one version (ws, fastify's
        // fast-json-stringify and light-my-request 6.6.0, …): the store has exactly those.
        [...lockedSingleVersions()]
          .filter(([name]) => name !== "@types/node" && name !== "ioredis")
          .map(([name, v]) => `  "${name}": ${v}\n`)
          .join("") +
        // As the workspace: protobufjs (the RLS's gRPC) has a postinstall it does not need.
        "allowBuilds:\n  protobufjs: false\n",
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
    // Only what the installed commands run: no TypeScript runner, bench, simulation or Toxiproxy client.
    for (const dev of ["tsx", "@geoquota/bench", "@geoquota/sim", "toxiproxy-node-client"])
      expect(Object.keys(cli.dependencies)).not.toContain(dev);
    // The bin runs the bundled commands (scripts/bundle.mjs), as in the repository.
    const bundle = join(consumer, "node_modules", "@geoquota", "cli", "dist", "bundle");
    for (const f of ["main.js", "commands/region.js", "commands/gossip.js", "commands/cluster.js"])
      expect(existsSync(join(bundle, f))).toBe(true);
  });

  it("the CLI installs without the test kit (its process spawners come from @geoquota/procs)", () => {
    const installed = readdirSync(join(consumer, "node_modules", ".pnpm"));
    expect(installed.some((d) => d.startsWith("@geoquota+procs@"))).toBe(true);
    expect(installed.filter((d) => d.startsWith("@geoquota+testkit@"))).toEqual([]);
    expect(installed.filter((d) => d.startsWith("@geoquota+bench@"))).toEqual([]);
  });

  it("the installed CLI's bench says it needs a checkout (exit 2), not a module-not-found trace", async () => {
    const r = await runStatus(
      join(consumer, "node_modules", ".bin", "geoquota"),
      ["bench", "--smoke"],
      consumer,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("geoquota bench runs from a checkout of the repository");
    expect(r.stderr).not.toContain("ERR_MODULE_NOT_FOUND");
  });

  it("the published manifests: ranges, fastify a peer, no workspace:*, license/repository/engines", () => {
    const store = join(consumer, "node_modules", ".pnpm");
    for (const dir of readdirSync(store).filter((d) => d.startsWith("@geoquota+"))) {
      const name = dir.slice("@geoquota+".length).split("@")[0]!;
      const m = JSON.parse(
        readFileSync(join(store, dir, "node_modules", "@geoquota", name, "package.json"), "utf8"),
      );
      expect(m.license, name).toBe("MIT");
      expect(
        existsSync(join(store, dir, "node_modules", "@geoquota", name, "LICENSE")),
        `${name} LICENSE`,
      ).toBe(true);
      expect(m.repository?.directory, name).toBe(`packages/${name}`);
      expect(m.engines?.node, name).toBe(">=20");
      for (const [dep, spec] of Object.entries({ ...m.dependencies, ...m.peerDependencies })) {
        expect(String(spec), `${name} → ${dep}`).not.toMatch(/^workspace:/);
        if (!dep.startsWith("@geoquota/")) expect(String(spec), `${name} → ${dep}`).toMatch(/^\^/);
      }
      if (name === "limiter") {
        expect(m.dependencies.fastify).toBeUndefined();
        expect(m.peerDependencies.fastify).toBe("^5.0.0");
        expect(m.dependencies["fastify-plugin"]).toMatch(/^\^/);
      }
    }
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
    writeFileSync(
      join(consumer, "policies.json"),
      JSON.stringify({
        default: { algorithm: "token_bucket", capacity: 2, refillPerSecond: 0.001 },
        policies: [],
      }),
    );
    const cfg = JSON.parse(readFileSync(join(root, "regions", "us-east.json"), "utf8"));
    // Port 0: no port is picked for it to bind later; it reports the one it got.
    cfg.listen = { host: "127.0.0.1", port: 0 };
    cfg.redis.url = redis.url;
    cfg.regions = [{ id: "us-east", gossip: "127.0.0.1:1" }];
    cfg.policiesFile = "policies.json";
    writeFileSync(join(consumer, "region.json"), JSON.stringify(cfg));
    const bin = join(consumer, "node_modules", ".bin", "geoquota");
    const started = spawn(bin, ["region", "--config", join(consumer, "region.json")], {
      cwd: consumer,
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      env: { ...process.env, GQ_READY_IPC: "1" },
    });
    child = started;
    const deadline = Date.now() + 60_000;
    // The readiness message the local cluster's orchestrator reads (packages/cli/src/cluster/ready.ts).
    const ready = await new Promise<{ listeners?: { http?: string } }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error("installed region service never reported ready")),
        60_000,
      );
      started.once("message", (m) => {
        clearTimeout(timer);
        resolve(m as { listeners?: { http?: string } });
      });
      started.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`installed region service exited (${code})`));
      });
    });
    expect(ready.listeners?.http).toMatch(/^127\.0\.0\.1:\d+$/);
    const url = `http://${ready.listeners!.http}`;
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

// The plugin beside @fastify/rate-limit in one TypeScript app, installed with npm.
describe("npm: the packed libraries in a TypeScript app with @fastify/rate-limit", () => {
  const work = mkdtempSync(join(tmpdir(), "gq-npm-"));
  const app = join(work, "app");
  let redis: RedisServer;
  // The limiter and the workspace packages it depends on (each a direct dependency, so
  // npm takes them from the tarballs: the manifests name them at version 0.1.0).
  const libraries = ["config", "core", "crdt", "edge", "limiter", "redis", "rollout"];

  beforeAll(async () => {
    const file = await packAll();
    mkdirSync(join(app, "src"), { recursive: true });
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({
        name: "npm-consumer",
        private: true,
        type: "module",
        dependencies: {
          ...Object.fromEntries(libraries.map((p) => [`@geoquota/${p}`, `file:${file(p)}`])),
          // The limiter's peer, and the other plugin: the workspace's versions.
          fastify: pinned("fastify"),
          "@fastify/rate-limit": pinned("@fastify/rate-limit"),
          ioredis: pinned("ioredis"),
          "@types/node": pinned("@types/node"),
        },
        // As in the workspace: fastify's light-my-request 6.6.0 runs on Node 20.
        overrides: { "light-my-request": "6.6.0" },
      }),
    );
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          types: ["node"],
          // The packages' declarations are checked too: TS2717 (two plugins declaring one
          // route option with different types) is an error in a declaration file.
          skipLibCheck: false,
        },
        include: ["src"],
      }),
    );
    // Both route options in one app: `geoquota` (ours) and `rateLimit` (theirs) — before
    // the rename this was TS2717 (two declarations of `rateLimit` with different types).
    writeFileSync(
      join(app, "src", "server.ts"),
      `import rateLimit from "@fastify/rate-limit";
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { createRedisStore, type GeoquotaPluginOptions, geoquotaRateLimit, initFreshRegion, Limiter } from "@geoquota/limiter";
import Fastify from "fastify";
import { Redis } from "ioredis";

const url = process.argv[2];
if (url === undefined) throw new Error("usage: server.js REDIS_URL");
const redis = new Redis(url);
await initFreshRegion(redis);
const config = parseRegionConfig(
  {
    region: "solo",
    listen: { host: "127.0.0.1", port: 0 },
    redis: { url },
    regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
    gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
    sharedSecret: "npm-consumer-shared-secret",
    adminToken: "npm-consumer-admin-token",
  },
  { file: "inline", env: {} },
);
const policies = parsePolicies({ default: { capacity: 1, refillPerSecond: 0.001 } }, "inline", ["solo"]);
const store = createRedisStore({
  redis,
  region: "solo",
  timing: { epsilonUs: config.lease.epsilonMs * 1000, loanDurationUs: config.lease.loanDurationMs * 1000 },
});
const limiter = new Limiter({ store, config, policies });
const options: GeoquotaPluginOptions = { limiter, key: { header: "x-tenant-id" }, hook: "onRequest" };
const app = Fastify();
await app.register(rateLimit, { global: false });
await app.register(geoquotaRateLimit, options);
app.get("/ours", { config: { geoquota: { resource: "ours" } } }, async () => ({ by: "geoquota" }));
app.get("/theirs", { config: { rateLimit: { max: 1, timeWindow: 60_000 } } }, async () => ({ by: "fastify-rate-limit" }));
const hit = async (path: string) => {
  const r = await app.inject({ method: "GET", url: path, headers: { "x-tenant-id": "acme" } });
  return { status: r.statusCode, policy: r.headers["ratelimit-policy"] !== undefined, legacy: r.headers["x-ratelimit-limit"] };
};
const out = { ours: [await hit("/ours"), await hit("/ours")], theirs: [await hit("/theirs"), await hit("/theirs")] };
console.log(JSON.stringify(out));
await app.close();
await store.close();
redis.disconnect();
`,
    );
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], app);
    redis = await startRedis();
  }, 900_000);

  afterAll(async () => {
    await redis?.stop();
  });

  it("npm installed the tarballs (workspace:* rewritten) with fastify once, as the limiter's peer", () => {
    const m = JSON.parse(
      readFileSync(join(app, "node_modules", "@geoquota", "limiter", "package.json"), "utf8"),
    );
    expect(m.peerDependencies).toEqual({ fastify: "^5.0.0" });
    expect(existsSync(join(app, "node_modules", "@geoquota", "limiter", "node_modules", "fastify"))).toBe(
      false,
    );
    expect(existsSync(join(app, "node_modules", "fastify-plugin"))).toBe(true);
  });

  it("the library set brings no process spawners: no @geoquota/procs, no Toxiproxy client", () => {
    expect(existsSync(join(app, "node_modules", "@geoquota", "procs"))).toBe(false);
    expect(existsSync(join(app, "node_modules", "toxiproxy-node-client"))).toBe(false);
  });

  it("type-checks with tsc: both plugins' route options in one app", async () => {
    const tsc = join(root, "node_modules", ".bin", "tsc");
    await run(tsc, ["-p", "tsconfig.json"], app);
    // And the check is real: our option with their type is refused.
    const bad = join(app, "src", "bad.ts");
    writeFileSync(
      bad,
      `import Fastify from "fastify";
import "@geoquota/limiter";
Fastify().get("/x", { config: { geoquota: { max: 1 } } }, async () => 1);
`,
    );
    const r = await runStatus(tsc, ["-p", "tsconfig.json"], app);
    rmSync(bad);
    expect(r.code).not.toBe(0);
  }, 300_000); // two full tsc runs: ~10 s on a quiet machine, past 120 s at load 38

  it("runs: one request through each plugin, then each denies its own way", async () => {
    const built = join(app, "server.mjs");
    // tsc type-checked; esbuild (the workspace's) strips the types for Node 20 to run.
    await run(
      join(root, "node_modules", ".bin", "esbuild"),
      ["src/server.ts", "--format=esm", "--platform=node", `--outfile=${built}`],
      app,
    );
    const out = JSON.parse((await run(process.execPath, [built, redis.url], app)).trim());
    expect(out.ours).toEqual([
      { status: 200, policy: true, legacy: "1" },
      { status: 429, policy: true, legacy: "1" },
    ]);
    expect(out.theirs[0]).toMatchObject({ status: 200, policy: false });
    expect(out.theirs[1]).toMatchObject({ status: 429, policy: false });
  }, 60_000);
});
