// Starts a local multi-region cluster: per region a real redis-server, a
// limiter service process and a gossip daemon process, optionally with every
// gossip link and every limiter→Redis link behind a real Toxiproxy proxy.
// Used by `geoquota cluster`, `demo`, `chaos`, `bench` and the integration tests.
//
// Start order (what `geoquota cluster --json` waits for before its line):
// the Redis servers (and Toxiproxy) at once; each Redis marked fresh; then all
// six node processes at once (the bundled CLI, dist/bundle/); each binds port
// 0 and reports over IPC the addresses it got once it serves (ready.ts), and
// is then confirmed by one request: limiter /readyz 200 (its Redis answers),
// gossip daemon /healthz 200. No port is picked here for a child to bind
// later (another process could take it in between). The daemons learn each
// other's gossip addresses only then: the orchestrator makes the gossip
// proxies (with Toxiproxy), hands each daemon its peers over IPC, and
// rewrites every region's config file with the real addresses, so the files
// describe the running cluster (`policy --config` reads them) and a restarted
// process binds the port it had (or, if that was taken meanwhile, another:
// the peers and proxies are pointed at it again).
// Nothing waits for gossip links: they come up within a round or two.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPolicies } from "@geoquota/config";
import { initFreshRegion } from "@geoquota/limiter";
import { seedSnapshot } from "@geoquota/rollout";
import {
  type ManagedProcess,
  type RedisServer,
  type StartRedisOptions,
  repoRoot,
  spawnManaged,
  startRedis,
  startToxiproxy,
  type ToxiproxyServer,
  waitFor,
} from "@geoquota/procs";
import { type ClusterLogs, clusterLogs, type LogSink } from "./logs.js";
import {
  daemonRedisProxyName,
  dialPairs,
  gossipProxiesOf,
  gossipProxyName,
  redisProxyName,
  regionIds,
} from "./ids.js";
import { setProxiesEnabled } from "./proxies.js";
import { type Listeners, READY_IPC_ENV, readySignal, sendPeers } from "./ready.js";

export interface ClusterOptions {
  regions?: number;
  /** Policies file; defaults to regions/policies.json. */
  policiesFile?: string;
  toxiproxy?: boolean;
  /** Overrides merged into every region config (e.g. lease timing, leased path). */
  configOverrides?: Record<string, unknown>;
  /** Per-region overrides, by region id. */
  regionOverrides?: Record<string, Record<string, unknown>>;
  /** Extra environment for the child processes. */
  env?: Record<string, string>;
  /** Per-region redis-server binary and environment, by region id (a clock-fault test's libfaketime). */
  redis?: Record<string, Pick<StartRedisOptions, "binary" | "env">>;
  /**
   * With toxiproxy: the daemon reaches its Redis through a proxy of its own
   * (`redisd_<id>`, beside the limiter's `redis_<id>`) instead of directly, so
   * a failover can move both links to a promoted replica, as one address (a
   * VIP, a DNS name) moves in production. Default off: the daemon's link is direct.
   */
  daemonRedisProxy?: boolean;
  /**
   * A directory for one log file per process (`<region>-redis.log`,
   * `<region>-limiter.log`, `<region>-gossip.log`; created, kept after stop).
   * Without it the logs are only in memory (each process's bounded `output()`).
   */
  logDir?: string;
  /** Also every log line, prefixed with its process's name (needs `logDir`). */
  logSink?: LogSink;
  /**
   * Each limiter also serves Envoy's rate limit service (RLS v3, gRPC; DESIGN §11) on a
   * port of its own choosing, reported in its ready message (`ClusterRegion.rls`).
   * `configOverrides.rls` adds to it (e.g. envoyproxy/ratelimit `configs`). Default off.
   */
  rls?: boolean;
}

export interface ClusterRegion {
  readonly id: string;
  /** Limiter HTTP base URL. */
  readonly url: string;
  /** The region's own Redis (direct, not through a proxy). */
  readonly redis: string;
  readonly redisServer: RedisServer;
  /** Gossip daemon HTTP (health, metrics, status). */
  readonly gossipUrl: string;
  /** The limiter's RLS v3 gRPC address (`host:port`), when the cluster runs with `rls`. */
  readonly rls?: string;
  readonly configPath: string;
  limiter: ManagedProcess;
  gossip: ManagedProcess;
}

export interface Cluster {
  readonly regions: ClusterRegion[];
  readonly toxiproxy?: { server: ToxiproxyServer; proxies: string[] };
  readonly dir: string;
  readonly policiesPath: string;
  /** The log directory (ClusterOptions.logDir), if any. */
  readonly logDir?: string;
  /** The one line `geoquota cluster --json` prints. */
  describe(): string;
  /** Stops (or SIGKILLs) a region's gossip daemon and starts a new one on the same config. */
  restartGossip(id: string, opts?: { kill?: boolean }): Promise<void>;
  /** Stops (or SIGKILLs) a region's gossip daemon and leaves it down. */
  stopGossip(id: string, opts?: { kill?: boolean }): Promise<void>;
  /** Starts the daemon of a region whose daemon is down. */
  startGossip(id: string): Promise<void>;
  /** Cuts (false) or heals (true) every gossip link of a region (needs toxiproxy). */
  setGossipLinks(id: string, enabled: boolean): Promise<void>;
  restartLimiter(id: string, opts?: { kill?: boolean }): Promise<void>;
  /** Stops (or SIGKILLs) a region's limiter and leaves it down. */
  stopLimiter(id: string, opts?: { kill?: boolean }): Promise<void>;
  /**
   * Starts the limiter of a region whose limiter is down: on its port, or on
   * another if that was taken meanwhile (`url` then says where).
   */
  startLimiter(id: string): Promise<void>;
  stop(): Promise<void>;
}

const binPath = fileURLToPath(new URL("../../bin/geoquota.mjs", import.meta.url));

/**
 * Node flags of each long-running role (issue 24 point 8). The gossip daemon allocates a
 * little every round (frames to and from each peer), never little enough for V8 to count it
 * idle and shrink its young generation, which the start's allocations grew to 2 × 16 MB: a
 * 10-region cluster's daemons sat at ≈ 105 MB RSS, ≈ 75 MB with 1 MB semi-spaces (bench
 * section 9). Its rounds are off every request's path, so the scavenges this adds cost no
 * decision anything. The limiter keeps V8's default: its young generation is its check
 * path's, and an idle limiter's shrinks by itself. docker-compose.yml and the README's
 * deployment notes give the daemon the same flag.
 */
export const ROLE_NODE_FLAGS: Readonly<Record<"region" | "gossip", readonly string[]>> = {
  region: [],
  gossip: ["--max-semi-space-size=1"],
};

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const cur = out[k];
    if (
      v &&
      typeof v === "object" &&
      !Array.isArray(v) &&
      cur &&
      typeof cur === "object" &&
      !Array.isArray(cur)
    ) {
      out[k] = deepMerge(cur as Record<string, unknown>, v as Record<string, unknown>);
    } else out[k] = v;
  }
  return out;
}

/** True when GET `url` answers 2xx within a second (node:http: no fetch machinery to load). */
function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = get(url, { timeout: 1000 }, (res) => {
      res.resume();
      resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300);
    });
    req.once("timeout", () => req.destroy(new Error(`GET ${url}: no answer within 1000 ms`)));
    req.once("error", reject);
  });
}

// Generous: six processes start at once, and on a loaded 2-core machine that
// can take most of a minute.
const startTimeoutMs = 120_000;

/**
 * Waits for a process the orchestrator started to report that it serves and
 * where (ready.ts), then for `path` on its `http` listener to answer 2xx: the
 * same condition as before the signal existed, now usually met by the first
 * request instead of by polling. Resolves with the reported listeners.
 */
async function waitUp(
  path: string,
  what: string,
  proc: ManagedProcess,
  required: readonly string[],
): Promise<Listeners> {
  const deadline = Date.now() + startTimeoutMs;
  const listeners = await readySignal(proc, what, startTimeoutMs, ["http", ...required]);
  const url = `http://${listeners.http}${path}`;
  await waitFor(
    what,
    async () => {
      if (proc.child.exitCode !== null)
        throw new Error(`${what}: process exited:\n${proc.output().slice(-2000)}`);
      return await httpOk(url);
    },
    Math.max(deadline - Date.now(), 1000),
    50,
  );
  return listeners;
}

/** The port of a `host:port` (IPv6 in brackets). */
function portOf(endpoint: string): number {
  return Number(endpoint.slice(endpoint.lastIndexOf(":") + 1));
}

/** Where a process listens that has not bound yet: port 0, the kernel picks. */
const UNBOUND = "127.0.0.1:0";

interface Addresses {
  /** Limiter HTTP, gossip mesh, gossip daemon HTTP (`host:port`; UNBOUND before the first start). */
  http: string;
  gossip: string;
  gossipHttp: string;
  /** The limiter's RLS listener (with `rls` only). */
  rls: string;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const n = options.regions ?? 3;
  if (!Number.isInteger(n) || n < 1 || n > 16)
    throw new Error(`--regions: expected an integer 1..16, got ${n}`);
  const ids = regionIds(n);
  const rlsOn = options.rls === true;
  const policiesSource = resolve(options.policiesFile ?? join(repoRoot, "regions", "policies.json"));
  loadPolicies(policiesSource); // validate before starting anything: a bad file names itself
  const dir = mkdtempSync(join(tmpdir(), "geoquota-cluster-"));
  const policiesPath = join(dir, "policies.json");
  writeFileSync(policiesPath, readFileSync(policiesSource));

  const started: Array<{ stop(): Promise<void> }> = [];
  const regions: ClusterRegion[] = [];
  let toxi: ToxiproxyServer | undefined;
  const proxies: string[] = [];
  const logs: ClusterLogs | undefined =
    options.logDir !== undefined
      ? clusterLogs(
          resolve(options.logDir),
          options.logSink,
          ids.flatMap((id) => [`${id}-redis`, `${id}-limiter`, `${id}-gossip`]),
        )
      : undefined;
  const stopAll = async () => {
    await Promise.allSettled(regions.flatMap((r) => [r.limiter?.stop(), r.gossip?.stop()]));
    await Promise.allSettled(started.map((s) => s.stop()));
    await logs?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // The Redis servers and Toxiproxy start at once (each retries on a port race).
    const [redisSettled, toxiSettled] = await Promise.all([
      Promise.allSettled(ids.map((id) => startRedis(options.redis?.[id] ?? {}))),
      Promise.allSettled(options.toxiproxy ? [startToxiproxy()] : []),
    ]);
    for (const r of [...redisSettled, ...toxiSettled]) if (r.status === "fulfilled") started.push(r.value);
    for (const r of [...redisSettled, ...toxiSettled]) if (r.status === "rejected") throw r.reason;
    const redis = redisSettled.map((r) => (r as PromiseFulfilledResult<RedisServer>).value);
    // Its start-up lines are already in output(): replayed, then followed.
    for (const [i, id] of ids.entries()) logs?.attach(`${id}-redis`, redis[i]!.process, { replay: true });
    toxi = (toxiSettled[0] as PromiseFulfilledResult<ToxiproxyServer> | undefined)?.value;
    // A brand-new Redis provably never held state, so the region need not
    // start in recovery (see initFreshRegion for why this is safe only here).
    // Its policy snapshot is the seed (version 0: the policies file), so the
    // daemons start knowing their policy without waiting for each other.
    const seedPolicies = JSON.parse(readFileSync(policiesPath, "utf8")) as unknown;
    await Promise.all(
      redis.map(async (r, i) => {
        const c = r.client();
        await initFreshRegion(c);
        await seedSnapshot(c, seedPolicies, { region: ids[i]!, regions: ids });
        c.disconnect();
      }),
    );
    // Redis proxies first: a limiter's config names its Redis. The gossip
    // proxies need the daemons' real addresses, so they come after them.
    const redisTarget = new Map<string, string>();
    const daemonRedisTarget = new Map<string, string>();
    if (toxi) {
      for (const [i, id] of ids.entries()) {
        const name = redisProxyName(id);
        const { listen } = await toxi.proxy(name, `127.0.0.1:${redis[i]!.port}`);
        redisTarget.set(id, `redis://${listen}`);
        proxies.push(name);
        if (options.daemonRedisProxy === true) {
          const dname = daemonRedisProxyName(id);
          const d = await toxi.proxy(dname, `127.0.0.1:${redis[i]!.port}`);
          daemonRedisTarget.set(id, `redis://${d.listen}`);
          proxies.push(dname);
        }
      }
    }
    const addresses = new Map<string, Addresses>(
      ids.map((id) => [id, { http: UNBOUND, gossip: UNBOUND, gossipHttp: UNBOUND, rls: UNBOUND }]),
    );
    const addr = (id: string) => addresses.get(id)!;
    // What each region dials for each peer: its proxy, or the peer's own address.
    const dialTarget = new Map<string, string>(); // `${dialer}>${acceptor}` → host:port
    const peerAddress = (self: string, peer: string) =>
      dialTarget.get(`${self}>${peer}`) ?? addr(peer).gossip;
    const peersOf = (self: string): Record<string, string> =>
      Object.fromEntries(ids.filter((p) => p !== self).map((p) => [p, peerAddress(self, p)]));
    const adminTokens = new Map<string, string>();
    const configPathOf = (id: string) => join(dir, `${id}.json`);
    // Written before the first start (every port 0) and again whenever an
    // address is learned or moves: the file is what a restarted process reads.
    const writeConfig = (i: number, id: string) => {
      const a = addr(id);
      const base: Record<string, unknown> = {
        region: id,
        listen: { host: "127.0.0.1", port: portOf(a.http) },
        // A local cluster shares a small machine with its own traffic (and,
        // in tests, with other test files): a 50 ms Redis timeout would open
        // the breaker on scheduling noise, so local clusters allow 200 ms.
        redis: { url: redisTarget.get(id) ?? redis[i]!.url, timeoutMs: 200 },
        breaker: { failureThreshold: 10, openMs: 500 },
        // Port 0: not known yet (the daemon is handed it over IPC).
        regions: ids.map((peer) => ({ id: peer, gossip: peer === id ? a.gossip : peerAddress(id, peer) })),
        gossip: {
          listen: { host: "127.0.0.1", port: portOf(a.gossip) },
          http: { host: "127.0.0.1", port: portOf(a.gossipHttp) },
          // Loopback links: redial fast so a healed link is back within a round.
          reconnect: { baseMs: 50, capMs: 500 },
          // A local cluster's links never leave 127.0.0.1: plaintext, said
          // explicitly (the config requires TLS otherwise). Overrides that
          // configure gossip.tls turn this off below.
          plaintext: true,
          // The limiter's Redis link may be proxied (and cut); the daemon's is
          // direct, or behind a proxy of its own (daemonRedisProxy).
          ...(redisTarget.has(id) ? { redisUrl: daemonRedisTarget.get(id) ?? redis[i]!.url } : {}),
        },
        sharedSecret: "local-cluster-secret",
        adminToken: "local-cluster-admin",
        policiesFile: policiesPath,
        // Port 0 at first, then the port it reported: a restarted limiter binds it again.
        ...(rlsOn ? { rls: { listen: { host: "127.0.0.1", port: portOf(a.rls) } } } : {}),
      };
      const merged = deepMerge(
        deepMerge(base, options.configOverrides ?? {}),
        options.regionOverrides?.[id] ?? {},
      );
      const mergedGossip = merged.gossip as Record<string, unknown>;
      if (mergedGossip.tls !== undefined) delete mergedGossip.plaintext;
      // The admin token as the JSON line reports it (a `{ env }` reference is not printed).
      if (typeof merged.adminToken === "string") adminTokens.set(id, merged.adminToken);
      writeFileSync(configPathOf(id), `${JSON.stringify(rewrite(id, merged), null, 2)}\n`);
      written.add(id);
    };
    // A region's file is the user's once written (`configPath`: edit it, restart the process):
    // later writes, after a process moved to another port, change only the addresses this
    // orchestrator owns and keep every other edit. Rewriting the whole file from the start
    // options undid an edit to another region's file whenever several processes restarted at
    // once (the bench's "re-weighting on" left some daemons off).
    const written = new Set<string>();
    const rewrite = (id: string, merged: Record<string, unknown>): Record<string, unknown> => {
      if (!written.has(id)) return merged;
      let current: Record<string, unknown>;
      try {
        current = JSON.parse(readFileSync(configPathOf(id), "utf8")) as Record<string, unknown>;
      } catch {
        return merged; // unreadable (a user's half-written edit): the orchestrator's own view
      }
      const g = merged.gossip as Record<string, unknown>;
      const addresses: Record<string, unknown> = {
        listen: merged.listen,
        regions: merged.regions,
        redis: { url: (merged.redis as Record<string, unknown>).url },
        gossip: {
          listen: g.listen,
          ...(g.http !== undefined ? { http: g.http } : {}),
          ...(g.redisUrl !== undefined ? { redisUrl: g.redisUrl } : {}),
        },
        ...(merged.rls !== undefined
          ? { rls: { listen: (merged.rls as Record<string, unknown>).listen } }
          : {}),
      };
      return deepMerge(current, addresses);
    };
    const writeConfigs = () => {
      for (const [i, id] of ids.entries()) writeConfig(i, id);
    };
    writeConfigs();
    for (const [i, id] of ids.entries()) {
      const a = addr(id);
      regions.push({
        id,
        get url() {
          return `http://${a.http}`;
        },
        redis: redis[i]!.url,
        redisServer: redis[i]!,
        get gossipUrl() {
          return `http://${a.gossipHttp}`;
        },
        configPath: configPathOf(id),
        limiter: undefined as unknown as ManagedProcess,
        gossip: undefined as unknown as ManagedProcess,
      });
      // A getter like url's (a spread would copy the address before it is known).
      if (rlsOn) Object.defineProperty(regions[i], "rls", { get: () => a.rls, enumerable: true });
    }
    const env = { ...options.env, [READY_IPC_ENV]: "1" };
    const spawnRole = (role: "region" | "gossip", r: ClusterRegion) => {
      const args = [...ROLE_NODE_FLAGS[role], binPath, role, "--config", r.configPath];
      const proc = spawnManaged(process.execPath, args, env, {
        ipc: true,
      });
      // A restarted process appends to the same file.
      logs?.attach(`${r.id}-${role === "region" ? "limiter" : "gossip"}`, proc);
      return proc;
    };
    const limiterUp = async (r: ClusterRegion) => {
      const l = await waitUp("/readyz", `limiter ${r.id} ready`, r.limiter, rlsOn ? ["rls"] : []);
      addr(r.id).http = l.http!;
      if (rlsOn) addr(r.id).rls = l.rls!;
    };
    /** Records a daemon's addresses; true when its gossip address moved. */
    const gossipUp = async (r: ClusterRegion): Promise<boolean> => {
      const l = await waitUp("/healthz", `gossip ${r.id} up`, r.gossip, ["gossip"]);
      const a = addr(r.id);
      const moved = a.gossip !== l.gossip;
      a.gossip = l.gossip!;
      a.gossipHttp = l.http!;
      return moved;
    };
    for (const r of regions) {
      r.limiter = spawnRole("region", r);
      r.gossip = spawnRole("gossip", r);
    }
    await Promise.all(regions.flatMap((r) => [limiterUp(r), gossipUp(r)]));
    if (toxi) {
      for (const [a, b] of dialPairs(ids)) {
        const name = gossipProxyName(a, b);
        const { listen } = await toxi.proxy(name, addr(b).gossip);
        dialTarget.set(`${a}>${b}`, listen);
        proxies.push(name);
      }
    }
    for (const r of regions) sendPeers(r.gossip, peersOf(r.id));
    writeConfigs();
    const find = (id: string) => {
      const r = regions.find((x) => x.id === id);
      if (!r) throw new Error(`no region ${id}`);
      return r;
    };
    const stopGossip = async (id: string, opts: { kill?: boolean } = {}) => {
      const r = find(id);
      if (opts.kill) {
        r.gossip.child.kill("SIGKILL");
        await r.gossip.exited;
      } else await r.gossip.stop();
    };
    const startGossip = async (id: string) => {
      const r = find(id);
      if (r.gossip.child.exitCode === null && r.gossip.child.signalCode === null) {
        throw new Error(`gossip daemon of ${id} is still running`);
      }
      r.gossip = spawnRole("gossip", r);
      const moved = await gossipUp(r);
      // It binds the port it had; only if that was taken meanwhile did it
      // take another, and whoever dials it is pointed there.
      if (moved) {
        if (toxi) {
          const acceptorOf = dialPairs(ids).filter(([, b]) => b === id);
          await Promise.all(
            acceptorOf.map(([a, b]) => toxi!.setUpstream(gossipProxyName(a, b), addr(b).gossip)),
          );
        } else {
          for (const other of regions)
            if (other.id !== id) sendPeers(other.gossip, { [id]: addr(id).gossip });
        }
      }
      // Its file may predate a peer's move (several restarted at once).
      sendPeers(r.gossip, peersOf(id));
      writeConfigs();
    };
    const stopLimiter = async (id: string, opts: { kill?: boolean } = {}) => {
      const r = find(id);
      if (opts.kill) {
        r.limiter.child.kill("SIGKILL");
        await r.limiter.exited;
      } else await r.limiter.stop();
    };
    const startLimiter = async (id: string) => {
      const r = find(id);
      if (r.limiter.child.exitCode === null && r.limiter.child.signalCode === null) {
        throw new Error(`limiter of ${id} is still running`);
      }
      r.limiter = spawnRole("region", r);
      await limiterUp(r);
      writeConfigs();
    };
    return {
      regions,
      ...(toxi ? { toxiproxy: { server: toxi, proxies } } : {}),
      dir,
      policiesPath,
      ...(logs ? { logDir: logs.dir } : {}),
      describe() {
        // Everything the README's next steps need: each region's URLs (the
        // admin API is the limiter's), its config (for `policy --config`), the
        // pids (for `kill -HUP`), the log files, and the admin token.
        const tokens = new Set(regions.map((r) => adminTokens.get(r.id)));
        const oneToken = tokens.size === 1 ? [...tokens][0] : undefined;
        const out: Record<string, unknown> = {
          regions: regions.map((r) => ({
            id: r.id,
            url: r.url,
            redis: r.redis,
            limiter: r.url,
            daemon: r.gossipUrl,
            ...(r.rls !== undefined ? { rls: r.rls } : {}),
            admin: `${r.url}/v1/policy`,
            metrics: { limiter: `${r.url}/metrics`, daemon: `${r.gossipUrl}/metrics` },
            config: r.configPath,
            ...(oneToken === undefined && adminTokens.get(r.id) !== undefined
              ? { adminToken: adminTokens.get(r.id) }
              : {}),
            pids: { redis: r.redisServer.process.pid, limiter: r.limiter.pid, daemon: r.gossip.pid },
            ...(logs
              ? {
                  logs: {
                    redis: logs.file(`${r.id}-redis`),
                    limiter: logs.file(`${r.id}-limiter`),
                    daemon: logs.file(`${r.id}-gossip`),
                  },
                }
              : {}),
          })),
          ...(oneToken !== undefined ? { adminToken: oneToken } : {}),
          pid: process.pid,
          dir,
          policiesFile: policiesPath,
          ...(logs ? { logDir: logs.dir } : {}),
        };
        if (toxi) out.toxiproxy = { url: toxi.url, proxies };
        return JSON.stringify(out);
      },
      async restartGossip(id, opts = {}) {
        await stopGossip(id, opts);
        await startGossip(id);
      },
      stopGossip,
      startGossip,
      async setGossipLinks(id, enabled) {
        if (!toxi) throw new Error("cutting gossip links needs the cluster started with toxiproxy");
        find(id);
        await setProxiesEnabled(toxi.api, gossipProxiesOf(ids, id), enabled);
      },
      async restartLimiter(id, opts = {}) {
        await stopLimiter(id, opts);
        await startLimiter(id);
      },
      stopLimiter,
      startLimiter,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
