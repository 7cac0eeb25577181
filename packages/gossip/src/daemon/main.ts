// `geoquota gossip --config F`: one region's daemon as a process. Wires the
// region config to the Redis store, the WebSocket mesh and a small HTTP
// server for /healthz, /readyz, /metrics and /v1/status.
import { createServer, type Server } from "node:http";
import { loadPolicies, loadRegionConfig, type RegionConfig, resolvePolicy } from "@geoquota/config";
import { checkRedisSetup } from "@geoquota/limiter";
import { Cluster, Redis } from "ioredis";
import pino from "pino";
import { Registry } from "prom-client";
import { Mesh } from "../transport/index.js";
import { GossipDaemon, type PolicyResolver } from "./daemon.js";
import { createDaemonMetrics } from "./metrics.js";
import { createRedisDaemonStore } from "./redis-port.js";

export interface RunningGossip {
  readonly daemon: GossipDaemon;
  readonly mesh: Mesh;
  readonly httpPort: number;
  close(): Promise<void>;
}

export function policyResolver(config: RegionConfig): PolicyResolver {
  const ids = config.regions.map((r) => r.id);
  const policies = loadPolicies(config.policiesPath, ids);
  const cache = new Map<string, ReturnType<PolicyResolver["resolve"]>>();
  return {
    resolve(tenant, resource) {
      const k = `${tenant}|${resource}`;
      const hit = cache.get(k);
      if (hit) return hit;
      const opts = { floorPpm: config.floorPpm };
      const policy = resolvePolicy(policies, ids, config.region, tenant, resource, opts);
      const regions = ids.map((id) => {
        const p = resolvePolicy(policies, ids, id, tenant, resource, opts);
        return { region: id, baseShare: p.baseShare, floorShare: p.floorShare };
      });
      const value = { policy, regions };
      if (cache.size > 100_000) cache.clear();
      cache.set(k, value);
      return value;
    },
  };
}

function waitReady(redis: Redis | Cluster, timeoutMs: number): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off("ready", onReady);
      reject(new Error(`redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once("ready", onReady);
  });
}

/** Starts the daemon for a loaded config; used by the CLI and by tests in-process. */
export async function startGossip(
  config: RegionConfig,
  options: { httpPort?: number; httpHost?: string; logger?: pino.Logger } = {},
): Promise<RunningGossip> {
  const log = options.logger ?? pino({ level: "silent" });
  const registry = new Registry();
  const url = config.gossip.redisUrl ?? config.redis.url;
  const redisOptions = { maxRetriesPerRequest: 1, enableAutoPipelining: false };
  // With redis.cluster the URL is one seed node; every script touches one slot.
  const redis = config.redis.cluster
    ? new Cluster([{ host: new URL(url).hostname, port: Number(new URL(url).port || 6379) }], {
        redisOptions,
      })
    : new Redis(url, redisOptions);
  redis.on("error", (err) => log.warn({ err: err.message }, "redis error"));
  // DESIGN §4: refuse an evicting Redis (or undeclared replicas) at start;
  // watch the primary's replication id (a failover to a replica that may have
  // missed writes puts the region into recovery); grants and returns leave
  // the region only once `redis.replicas` replicas hold them.
  let store: Awaited<ReturnType<typeof createRedisDaemonStore>>;
  try {
    // A Cluster client knows no node before it is ready (the setup check would pass vacuously).
    await waitReady(redis, 10_000);
    await checkRedisSetup(redis, { replicas: config.redis.replicas });
    store = await createRedisDaemonStore(redis, config, {
      primaryCheckMs: config.redis.primaryCheckMs,
      replicas: config.redis.replicas,
      onError: (where, err) => log.warn({ where, err: (err as Error).message }, "daemon error"),
    });
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const peers = config.regions.filter((r) => r.id !== config.region);
  let daemon: GossipDaemon | undefined;
  const mesh = new Mesh(
    {
      self: config.region,
      listen: config.gossip.listen,
      peers: peers.map((p) => ({ id: p.id, url: `ws://${p.gossip}` })),
      secret: config.sharedSecret,
      frameBytesMax: config.gossip.frameBytesMax,
      reconnect: config.gossip.reconnect,
      heartbeatMs: config.gossip.heartbeatMs,
    },
    {
      registry,
      handlers: {
        onFrame: (peer, bytes) => daemon?.onFrame(peer, bytes),
        onPeerUp: (peer) => {
          log.info({ peer }, "peer up");
          daemon?.peerUp(peer);
        },
        onPeerDown: (peer, reason) => log.info({ peer, reason }, "peer down"),
        onHandshakeFailure: (peer, reason) => log.warn({ peer, reason }, "handshake failed"),
      },
      logger: log,
    },
  );
  daemon = new GossipDaemon(
    {
      region: config.region,
      peers: peers.map((p) => p.id),
      round: config.gossip.round,
      reweighting: config.gossip.reweighting,
    },
    {
      store,
      link: mesh,
      policies: policyResolver(config),
      metrics: createDaemonMetrics(registry),
      onError: (where, err) => log.warn({ where, err: (err as Error).message }, "daemon error"),
    },
  );
  await mesh.start();
  daemon.start();
  const running = daemon;
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: string, type = "application/json") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (req.url === "/healthz") return send(200, '{"ok":true}');
    if (req.url === "/readyz") {
      const ready = redis.status === "ready";
      return send(ready ? 200 : 503, JSON.stringify({ ready }));
    }
    if (req.url === "/v1/status") {
      return send(200, JSON.stringify({ ...running.status(), links: mesh.peers() }));
    }
    if (req.url === "/metrics") {
      registry.metrics().then(
        (text) => send(200, text, registry.contentType),
        (err: Error) => send(500, JSON.stringify({ error: err.message })),
      );
      return;
    }
    send(404, '{"error":"not found"}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.httpPort ?? 0, options.httpHost ?? "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const httpPort = address && typeof address === "object" ? address.port : 0;
  return {
    daemon: running,
    mesh,
    httpPort,
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      await running.stop();
      await mesh.stop();
      await store.close();
      redis.disconnect();
    },
  };
}

/** The process entry: runs until SIGINT/SIGTERM. */
export async function runGossip(configPath: string): Promise<void> {
  const config = loadRegionConfig(configPath);
  const log = pino({ name: `gossip:${config.region}` });
  const http = config.gossip.http;
  const running = await startGossip(config, {
    logger: log,
    ...(http ? { httpPort: http.port, httpHost: http.host } : {}),
  });
  log.info({ port: running.mesh.port(), http: running.httpPort }, "gossip daemon started");
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await running.close();
}
