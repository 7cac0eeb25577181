// A real Redis Cluster of `n` masters (no replicas) on loopback, for tests of
// the Cluster-safe key schema.
import { execFile } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { Cluster } from "ioredis";
import { findBinary } from "./binaries.js";
import { type RedisServer, startRedis } from "./redis.js";
import { waitFor } from "./wait.js";

const run = promisify(execFile);

export interface RedisClusterServers {
  readonly servers: RedisServer[];
  /** A new ioredis Cluster client (ready, slot map loaded); closed by `stop()`. */
  client(): Promise<Cluster>;
  /** Stops the clients and servers and removes their directories. */
  stop(): Promise<void>;
}

function redisCli(): string {
  const next = join(dirname(findBinary("redis-server")), "redis-cli");
  try {
    accessSync(next, constants.X_OK);
    return next;
  } catch {
    return "redis-cli";
  }
}

/**
 * Starts `n` (≥ 3) cluster-enabled redis-servers, each with its own directory
 * and nodes file, joins them with `redis-cli --cluster create` and waits for
 * `cluster_state:ok` on every node.
 */
export async function startRedisCluster(n = 3): Promise<RedisClusterServers> {
  const dirs = Array.from({ length: n }, () => mkdtempSync(join(tmpdir(), "gq-cluster-")));
  const clients = new Set<Cluster>();
  const started = await Promise.allSettled(
    dirs.map((dir) =>
      startRedis({
        args: [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          join(dir, "nodes.conf"),
          "--cluster-node-timeout",
          "2000",
          "--dir",
          dir,
        ],
      }),
    ),
  );
  const servers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const stop = async () => {
    for (const c of clients) c.disconnect();
    clients.clear();
    await Promise.all(servers.map((s) => s.stop()));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    const failed = started.find((r) => r.status === "rejected");
    if (failed && failed.status === "rejected") throw failed.reason;
    await run(redisCli(), [
      "--cluster",
      "create",
      ...servers.map((s) => `${s.host}:${s.port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ]);
    for (const s of servers) {
      const c = s.client();
      await waitFor(`cluster_state:ok on ${s.port}`, async () =>
        /cluster_state:ok/.test(String(await c.cluster("INFO"))),
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const first = servers[0] as RedisServer;
  return {
    servers,
    async client() {
      const c = new Cluster([{ host: first.host, port: first.port }], {
        redisOptions: { maxRetriesPerRequest: 1 },
      });
      c.on("error", () => {});
      clients.add(c);
      await waitFor("cluster client ready", async () => c.status === "ready");
      // Every slot mapped to a master before the caller routes anything.
      await waitFor("slot map", async () => c.slots.length === 16384 && c.slots.every((s) => s?.[0]));
      return c;
    },
    stop,
  };
}
