import { Redis } from "ioredis";
import { findBinary } from "./binaries.js";
import { freePort } from "./ports.js";
import { type ManagedProcess, spawnManaged } from "./processes.js";
import { waitFor } from "./wait.js";

export interface RedisServer {
  readonly host: string;
  readonly port: number;
  /** `redis://host:port` */
  readonly url: string;
  readonly process: ManagedProcess;
  /** A new ioredis client to this server; closed by `stop()`. */
  client(): Redis;
  /** Stops the server (SIGTERM, then SIGKILL) and disconnects its clients. */
  stop(): Promise<void>;
  /** SIGKILL, like a crash: no shutdown, no goodbye to clients. */
  kill(): Promise<void>;
  /** Starts a new redis-server on the same port (fresh, empty: no persistence). */
  restart(): Promise<void>;
}

export interface StartRedisOptions {
  host?: string;
  /** Extra `redis-server` arguments, e.g. `["--maxmemory", "64mb"]`. */
  args?: readonly string[];
}

async function launch(host: string, port: number, args: readonly string[]): Promise<ManagedProcess> {
  const proc = spawnManaged(findBinary("redis-server"), [
    "--port",
    String(port),
    "--bind",
    host,
    "--save",
    "",
    "--appendonly",
    "no",
    "--protected-mode",
    "no",
    "--daemonize",
    "no",
    "--loglevel",
    "warning",
    ...args,
  ]);
  const probe = new Redis({
    host,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on("error", () => {});
  try {
    await waitFor(`redis-server on ${host}:${port}`, async () => {
      if (proc.child.exitCode !== null) throw new Error(`redis-server exited: ${proc.output().trim()}`);
      if (probe.status !== "ready") {
        probe.disconnect();
        await probe.connect();
      }
      return (await probe.ping()) === "PONG";
    });
  } catch (err) {
    await proc.stop();
    throw err;
  } finally {
    probe.disconnect();
  }
  return proc;
}

/**
 * Starts a `redis-server` with no persistence on a free loopback port and
 * waits until it answers PING. Retries on a port race.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const host = options.host ?? "127.0.0.1";
  const args = options.args ?? [];
  let proc: ManagedProcess | undefined;
  let port = 0;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5 && !proc; attempt++) {
    port = await freePort(host);
    try {
      proc = await launch(host, port, args);
    } catch (err) {
      lastError = err;
    }
  }
  if (!proc) throw lastError instanceof Error ? lastError : new Error("startRedis failed");
  let current = proc;
  const clients = new Set<Redis>();
  const closeClients = () => {
    for (const c of clients) c.disconnect();
    clients.clear();
  };
  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    get process() {
      return current;
    },
    client() {
      const c = new Redis({ host, port, maxRetriesPerRequest: 1 });
      c.on("error", () => {});
      clients.add(c);
      return c;
    },
    async stop() {
      closeClients();
      await current.stop();
    },
    async kill() {
      current.child.kill("SIGKILL");
      await current.exited;
    },
    async restart() {
      if (current.child.exitCode === null && current.child.signalCode === null) await current.stop();
      current = await launch(host, port, args);
    },
  };
}

/** Starts `n` Redis servers in parallel; on any failure stops those started. */
export async function startRedisServers(n: number, options: StartRedisOptions = {}): Promise<RedisServer[]> {
  const results = await Promise.allSettled(Array.from({ length: n }, () => startRedis(options)));
  const ok = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = results.find((r) => r.status === "rejected");
  if (failed && failed.status === "rejected") {
    await Promise.all(ok.map((s) => s.stop()));
    throw failed.reason;
  }
  return ok;
}
