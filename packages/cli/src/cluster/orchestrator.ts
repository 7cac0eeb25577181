// Starts a local multi-region cluster: per region a real redis-server, a
// limiter service process and a gossip daemon process, optionally with every
// gossip link and every limiter→Redis link behind a real Toxiproxy proxy.
// Used by `geoquota cluster`, `demo`, `chaos`, `bench` and the integration tests.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPolicies } from "@geoquota/config";
import { initFreshRegion } from "@geoquota/limiter";
import {
  freePort,
  type ManagedProcess,
  type RedisServer,
  repoRoot,
  spawnManaged,
  startRedis,
  startToxiproxy,
  type ToxiproxyServer,
  waitFor,
} from "@geoquota/procs";
import { dialPairs, gossipProxiesOf, gossipProxyName, redisProxyName, regionIds } from "./ids.js";
import { setProxiesEnabled } from "./proxies.js";

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
  readonly configPath: string;
  limiter: ManagedProcess;
  gossip: ManagedProcess;
}

export interface Cluster {
  readonly regions: ClusterRegion[];
  readonly toxiproxy?: { server: ToxiproxyServer; proxies: string[] };
  readonly dir: string;
  readonly policiesPath: string;
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
  stop(): Promise<void>;
}

const binPath = fileURLToPath(new URL("../../bin/geoquota.mjs", import.meta.url));

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

// Generous: six processes transpile and start at once, and on a loaded
// 2-core machine that can take most of a minute.
async function waitHttp(url: string, what: string, proc: ManagedProcess, timeoutMs = 120_000): Promise<void> {
  await waitFor(
    what,
    async () => {
      if (proc.child.exitCode !== null)
        throw new Error(`${what}: process exited:\n${proc.output().slice(-2000)}`);
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      return res.ok;
    },
    timeoutMs,
    50,
  );
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const n = options.regions ?? 3;
  if (!Number.isInteger(n) || n < 1 || n > 16)
    throw new Error(`--regions: expected an integer 1..16, got ${n}`);
  const ids = regionIds(n);
  const policiesSource = resolve(options.policiesFile ?? join(repoRoot, "regions", "policies.json"));
  loadPolicies(policiesSource); // validate before starting anything: a bad file names itself
  const dir = mkdtempSync(join(tmpdir(), "geoquota-cluster-"));
  const policiesPath = join(dir, "policies.json");
  writeFileSync(policiesPath, readFileSync(policiesSource));

  const started: Array<{ stop(): Promise<void> }> = [];
  const regions: ClusterRegion[] = [];
  let toxi: ToxiproxyServer | undefined;
  const proxies: string[] = [];
  const stopAll = async () => {
    await Promise.allSettled(regions.flatMap((r) => [r.limiter.stop(), r.gossip.stop()]));
    await Promise.allSettled(started.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const redis = await Promise.all(ids.map(() => startRedis()));
    started.push(...redis);
    // A brand-new Redis provably never held state, so the region need not
    // start in recovery (see initFreshRegion for why this is safe only here).
    await Promise.all(
      redis.map(async (r) => {
        const c = r.client();
        await initFreshRegion(c);
        c.disconnect();
      }),
    );
    const ports = await Promise.all(
      ids.map(async () => ({
        http: await freePort(),
        gossip: await freePort(),
        gossipHttp: await freePort(),
      })),
    );
    const gossipEndpoint = new Map<string, string>();
    for (const [i, id] of ids.entries()) gossipEndpoint.set(id, `127.0.0.1:${ports[i]!.gossip}`);
    // What each region dials for each peer, and the Redis URL its limiter uses.
    const dialTarget = new Map<string, string>(); // `${dialer}>${acceptor}` → host:port
    const redisTarget = new Map<string, string>();
    if (options.toxiproxy) {
      toxi = await startToxiproxy();
      started.push(toxi);
      for (const [a, b] of dialPairs(ids)) {
        const name = gossipProxyName(a, b);
        const { listen } = await toxi.proxy(name, gossipEndpoint.get(b)!);
        dialTarget.set(`${a}>${b}`, listen);
        proxies.push(name);
      }
      for (const [i, id] of ids.entries()) {
        const name = redisProxyName(id);
        const { listen } = await toxi.proxy(name, `127.0.0.1:${redis[i]!.port}`);
        redisTarget.set(id, `redis://${listen}`);
        proxies.push(name);
      }
    }
    for (const [i, id] of ids.entries()) {
      const base: Record<string, unknown> = {
        region: id,
        listen: { host: "127.0.0.1", port: ports[i]!.http },
        // A local cluster shares a small machine with its own traffic (and,
        // in tests, with other test files): a 50 ms Redis timeout would open
        // the breaker on scheduling noise, so local clusters allow 200 ms.
        redis: { url: redisTarget.get(id) ?? redis[i]!.url, timeoutMs: 200 },
        breaker: { failureThreshold: 10, openMs: 500 },
        regions: ids.map((peer) => ({
          id: peer,
          gossip:
            peer === id
              ? gossipEndpoint.get(id)!
              : (dialTarget.get(`${id}>${peer}`) ?? gossipEndpoint.get(peer)!),
        })),
        gossip: {
          listen: { host: "127.0.0.1", port: ports[i]!.gossip },
          http: { host: "127.0.0.1", port: ports[i]!.gossipHttp },
          // Loopback links: redial fast so a healed link is back within a round.
          reconnect: { baseMs: 50, capMs: 500 },
          // A local cluster's links never leave 127.0.0.1: plaintext, said
          // explicitly (the config requires TLS otherwise). Overrides that
          // configure gossip.tls turn this off below.
          plaintext: true,
          // The limiter's Redis link may be proxied (and cut); the daemon's is direct.
          ...(redisTarget.has(id) ? { redisUrl: redis[i]!.url } : {}),
        },
        sharedSecret: "local-cluster-secret",
        adminToken: "local-cluster-admin",
        policiesFile: policiesPath,
      };
      const merged = deepMerge(
        deepMerge(base, options.configOverrides ?? {}),
        options.regionOverrides?.[id] ?? {},
      );
      const mergedGossip = merged.gossip as Record<string, unknown>;
      if (mergedGossip.tls !== undefined) delete mergedGossip.plaintext;
      const configPath = join(dir, `${id}.json`);
      writeFileSync(configPath, `${JSON.stringify(merged, null, 2)}\n`);
      regions.push({
        id,
        url: `http://127.0.0.1:${ports[i]!.http}`,
        redis: redis[i]!.url,
        redisServer: redis[i]!,
        gossipUrl: `http://127.0.0.1:${ports[i]!.gossipHttp}`,
        configPath,
        limiter: undefined as unknown as ManagedProcess,
        gossip: undefined as unknown as ManagedProcess,
      });
    }
    const env = options.env ?? {};
    const spawnRole = (role: "region" | "gossip", r: ClusterRegion) =>
      spawnManaged(process.execPath, [binPath, role, "--config", r.configPath], env);
    for (const r of regions) {
      r.limiter = spawnRole("region", r);
      r.gossip = spawnRole("gossip", r);
    }
    await Promise.all(
      regions.flatMap((r) => [
        waitHttp(`${r.url}/readyz`, `limiter ${r.id} ready`, r.limiter),
        waitHttp(`${r.gossipUrl}/healthz`, `gossip ${r.id} up`, r.gossip),
      ]),
    );
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
      await waitHttp(`${r.gossipUrl}/healthz`, `gossip ${r.id} up`, r.gossip);
    };
    return {
      regions,
      ...(toxi ? { toxiproxy: { server: toxi, proxies } } : {}),
      dir,
      policiesPath,
      describe() {
        const out: Record<string, unknown> = {
          regions: regions.map((r) => ({ id: r.id, url: r.url, redis: r.redis })),
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
        const r = find(id);
        if (opts.kill) {
          r.limiter.child.kill("SIGKILL");
          await r.limiter.exited;
        } else await r.limiter.stop();
        r.limiter = spawnRole("region", r);
        await waitHttp(`${r.url}/readyz`, `limiter ${r.id} ready`, r.limiter);
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
