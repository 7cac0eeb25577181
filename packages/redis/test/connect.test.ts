// connectRedis, the one way a geoquota process opens its Redis: a Cluster
// client gets the URL's credentials and TLS (it is built from seed nodes, so
// nothing in the URL reaches the node connections unless copied into
// redisOptions), for the daemon and the limiter alike; the roles differ only
// in how they fail.
import { Cluster } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisConnectPlan } from "../src/index.js";

const daemonRedisOptions = (url: string, cluster: boolean) => redisConnectPlan(url, cluster, "daemon");

describe("redisConnectPlan", () => {
  it("copies username and password (percent-decoded) of a cluster URL into every node's options", () => {
    const o = daemonRedisOptions("redis://gq%2Ddaemon:p%40ss%3Aword@10.0.0.5:7001", true);
    expect(o.cluster).toBe(true);
    if (!o.cluster) return;
    expect(o.nodes).toEqual([{ host: "10.0.0.5", port: 7001 }]);
    expect(o.options.redisOptions).toMatchObject({ username: "gq-daemon", password: "p@ss:word" });
    expect(o.options.redisOptions.tls).toBeUndefined();
    // ioredis keeps them for the node connections it will open.
    const c = new Cluster(o.nodes, { ...o.options, lazyConnect: true });
    expect(c.options.redisOptions).toMatchObject({ username: "gq-daemon", password: "p@ss:word" });
    c.disconnect();
  });

  it("password-only URLs and rediss:// (TLS, server name checked) work too; default port 6379", () => {
    const o = daemonRedisOptions("rediss://:secret@redis.internal", true);
    if (!o.cluster) throw new Error("expected cluster options");
    expect(o.nodes).toEqual([{ host: "redis.internal", port: 6379 }]);
    expect(o.options.redisOptions.password).toBe("secret");
    expect(o.options.redisOptions.username).toBeUndefined();
    expect(o.options.redisOptions.tls).toEqual({ servername: "redis.internal" });
  });

  it("a standalone URL is passed whole (ioredis parses credentials itself)", () => {
    const o = daemonRedisOptions("redis://u:p@127.0.0.1:6390/2", false);
    expect(o).toMatchObject({ cluster: false, url: "redis://u:p@127.0.0.1:6390/2" });
  });

  it("the limiter role fails fast (no offline queue, no retries) and gets the same credentials on a cluster", () => {
    const standalone = redisConnectPlan("redis://127.0.0.1:6390", false, "limiter");
    expect(standalone.options).toMatchObject({ maxRetriesPerRequest: 0, enableOfflineQueue: false });
    const o = redisConnectPlan("rediss://u:p@10.0.0.5:7001", true, "limiter");
    if (!o.cluster) throw new Error("expected cluster options");
    expect(o.options.enableOfflineQueue).toBe(false);
    expect(o.options.redisOptions).toMatchObject({
      maxRetriesPerRequest: 0,
      username: "u",
      password: "p",
      tls: { servername: "10.0.0.5" },
    });
    // The daemon queues while reconnecting and retries once.
    const d = redisConnectPlan("redis://127.0.0.1:6390", false, "daemon");
    expect(d.options).toEqual({ maxRetriesPerRequest: 1, enableAutoPipelining: false });
  });
});
