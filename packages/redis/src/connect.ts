// The one place a geoquota process opens its region's Redis: the limiter
// service, the gossip daemon, the stream server and the CLI's tools all call
// connectRedis (DESIGN §7: every process writes through the scripts of this
// package). The two roles differ only in how they fail:
// - limiter: fail fast while disconnected (no offline queue, no retries) so
//   the breaker sees it at once, reconnect forever;
// - daemon: queue while reconnecting and retry a command once (a round is
//   not latency-critical), no auto-pipelining (its scripts are large).
// A Cluster client is given seed nodes only, so the URL's username, password
// and TLS (`rediss://`) are copied into the options of every node connection;
// a standalone client parses them from the URL itself.
import { Cluster, Redis } from "ioredis";

export type RedisRole = "limiter" | "daemon";

/** Options of one node connection (the subset of ioredis's RedisOptions geoquota sets). */
export interface NodeOptions {
  maxRetriesPerRequest: number;
  connectTimeout?: number;
  retryStrategy?: (attempt: number) => number;
  enableAutoPipelining?: boolean;
  enableOfflineQueue?: boolean;
  username?: string;
  password?: string;
  tls?: { servername: string };
}

export type RedisConnectPlan =
  | { readonly cluster: false; readonly url: string; readonly options: NodeOptions }
  | {
      readonly cluster: true;
      readonly nodes: { host: string; port: number }[];
      readonly options: {
        enableOfflineQueue?: boolean;
        clusterRetryStrategy?: (attempt: number) => number;
        redisOptions: NodeOptions;
      };
    };

const retry = (attempt: number) => Math.min(50 * attempt, 1000);

/** The connection options of `role` for `url` (pure; what connectRedis builds its client from). */
export function redisConnectPlan(url: string, cluster: boolean, role: RedisRole): RedisConnectPlan {
  const node: NodeOptions =
    role === "limiter"
      ? { maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: retry }
      : { maxRetriesPerRequest: 1, enableAutoPipelining: false };
  const queue = role === "limiter" ? { enableOfflineQueue: false } : {};
  if (!cluster) return { cluster: false, url, options: { ...node, ...queue } };
  const u = new URL(url);
  return {
    cluster: true,
    nodes: [{ host: u.hostname, port: Number(u.port || 6379) }],
    options: {
      ...queue,
      ...(role === "limiter" ? { clusterRetryStrategy: retry } : {}),
      redisOptions: {
        ...node,
        ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
        ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
        ...(u.protocol === "rediss:" ? { tls: { servername: u.hostname } } : {}),
      },
    },
  };
}

export interface ConnectRedisOptions {
  /** The URL is one seed node of a Redis Cluster (config `redis.cluster`). */
  readonly cluster?: boolean;
  readonly role?: RedisRole;
  /** Connection errors (ioredis prints them to the console when nobody listens). Default: ignored. */
  readonly onError?: (err: Error) => void;
}

/** A client for the region's Redis (`redis.url`), tuned for `role` (default limiter). */
export function connectRedis(url: string, options: ConnectRedisOptions = {}): Redis | Cluster {
  const plan = redisConnectPlan(url, options.cluster ?? false, options.role ?? "limiter");
  const client = plan.cluster
    ? new Cluster(plan.nodes, plan.options as ConstructorParameters<typeof Cluster>[1])
    : new Redis(plan.url, { ...plan.options });
  client.on("error", options.onError ?? (() => {}));
  return client;
}

/** The limiter's client (the public name of connectRedis with role "limiter"). */
export function connectRegionRedis(url: string, cluster = false): Redis | Cluster {
  return connectRedis(url, { cluster, role: "limiter" });
}

/** Resolves once the connection is ready (a limiter's commands fail fast before that: no offline queue). */
export function waitReady(redis: Redis | Cluster, timeoutMs: number): Promise<void> {
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
