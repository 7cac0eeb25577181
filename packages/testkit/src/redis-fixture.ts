// One redis-server per test file (or describe block), the setup many Redis
// test files shared line for line: started in beforeAll, an optional `setup`
// run on a client (e.g. `initFreshRegion` of @geoquota/redis, passed in: the
// test kit imports no geoquota package but the spawners and the oracle),
// stopped in afterAll even when a test failed.
import { type RedisServer, startRedis, startReplica } from "@geoquota/procs";
import { afterAll, beforeAll } from "vitest";

type RedisClient = ReturnType<RedisServer["client"]>;

export interface RedisFixture<T> {
  /** The file's redis-server. */
  readonly server: RedisServer;
  /** A client of it (disconnected by the server's stop). */
  readonly redis: RedisClient;
  /** What `setup` returned (undefined without `setup`). */
  readonly setup: T;
}

/**
 * Registers the hooks and returns the fixture; read its fields inside tests
 * and hooks (they throw before the beforeAll ran).
 */
export function redisPerFile<T = undefined>(setup?: (redis: RedisClient) => Promise<T>): RedisFixture<T> {
  let state: { server: RedisServer; redis: RedisClient; setup: T } | undefined;
  let server: RedisServer | undefined;
  beforeAll(async () => {
    server = await startRedis();
    const redis = server.client();
    state = { server, redis, setup: (setup ? await setup(redis) : undefined) as T };
  });
  afterAll(async () => {
    await server?.stop();
  });
  const ready = () => {
    if (state === undefined)
      throw new Error("redisPerFile: read before its beforeAll ran (use it inside a test or hook)");
    return state;
  };
  return {
    get server() {
      return ready().server;
    },
    get redis() {
      return ready().redis;
    },
    get setup() {
      return ready().setup;
    },
  };
}

/**
 * A primary and one replica of it, for the durability tests: each is pushed
 * to `started` as soon as it runs (the file's afterEach/afterAll stops them),
 * so a failure halfway leaves nothing behind.
 */
export async function startPrimaryWithReplica(
  started: RedisServer[],
): Promise<{ primary: RedisServer; replica: RedisServer }> {
  const primary = await startRedis();
  started.push(primary);
  const replica = await startReplica(primary);
  started.push(replica);
  return { primary, replica };
}
