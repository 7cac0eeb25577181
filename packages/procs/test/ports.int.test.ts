// No port race in the servers the harness starts (issue 26): redis-server,
// which cannot bind port 0, retries on a taken port and never adopts a server
// that answers on it but is not its own; Toxiproxy binds port 0 and is found
// from /proc; a proxy can be pointed at another upstream.
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  bindRetrying,
  candidatePort,
  ephemeralRange,
  listeningPorts,
  PortTakenError,
  type RedisServer,
  startRedis,
  startToxiproxy,
  type ToxiproxyServer,
} from "../src/index.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((f) => f()));
});

/** Holds a candidate port like another program would (a plain listener). */
async function holdPort(): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  return await bindRetrying("holder", async (port) => {
    const server = createServer();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => resolve());
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") throw new PortTakenError(port, "held");
      throw err;
    }
    // A prober that connected (and found no Redis) may leave its socket: close() waits for none.
    const sockets = new Set<Socket>();
    server.on("connection", (socket) => {
      sockets.add(socket);
      socket.resume(); // reads (and drops) what a prober sends, so it sees the prober leave
      socket.once("close", () => sockets.delete(socket));
    });
    cleanups.push(async () => {
      const closed = new Promise((r) => server.close(r));
      for (const socket of sockets) socket.destroy();
      await closed;
    });
    return { server, port, sockets };
  });
}

function redis(s: RedisServer): RedisServer {
  cleanups.push(() => s.stop());
  return s;
}

async function serverPid(s: RedisServer): Promise<number> {
  const c = s.client();
  const info = String(await c.info("server"));
  return Number(/^process_id:(\d+)/m.exec(info)?.[1]);
}

describe("ports", () => {
  it("candidate ports lie below the ephemeral range (no outgoing connection takes them)", () => {
    const { low } = ephemeralRange();
    for (let i = 0; i < 1000; i++) {
      const p = candidatePort();
      expect(p).toBeGreaterThanOrEqual(1024);
      if (low >= 12_000) expect(p).toBeLessThan(low);
    }
  });

  it("listeningPorts finds what a process bound on port 0", async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const port = (server.address() as { port: number }).port;
    expect(listeningPorts(process.pid)).toContain(port);
    expect(listeningPorts(2 ** 22 + 12_345)).toBeUndefined(); // no such process
  });

  it("bindRetrying tries another port on PortTakenError only, and names the last one", async () => {
    const tried: number[] = [];
    const picks = [11_001, 11_002, 11_003];
    const got = await bindRetrying(
      "x",
      async (p) => {
        tried.push(p);
        if (p !== 11_003) throw new PortTakenError(p, "taken");
        return p;
      },
      5,
      () => picks.shift()!,
    );
    expect(got).toBe(11_003);
    expect(tried).toEqual([11_001, 11_002, 11_003]);
    await expect(
      bindRetrying(
        "y",
        async () => Promise.reject(new Error("bad flag")),
        5,
        () => 11_004,
      ),
    ).rejects.toThrow("bad flag");
    await expect(
      bindRetrying(
        "z",
        async (p) => Promise.reject(new PortTakenError(p, "held")),
        3,
        () => 11_005,
      ),
    ).rejects.toThrow("z: 3 ports tried, all taken (last: port 11005 taken: held)");
  });
});

describe("redis-server on a taken port", () => {
  it("a port another program holds: redis-server retries on another", async () => {
    const held = await holdPort();
    const picks = [held.port];
    const s = redis(await startRedis({ pickPort: () => picks.shift() ?? candidatePort() }));
    expect(s.port).not.toBe(held.port);
    expect(await serverPid(s)).toBe(s.process.pid);
    expect(held.server.listening).toBe(true);
    // The probe gave up on the stranger: no connection of ours is left open to it.
    await new Promise((r) => setTimeout(r, 500));
    expect(held.sockets.size).toBe(0);
  });

  it("a port another redis-server holds: it answers PING, but is not adopted", async () => {
    const other = redis(await startRedis());
    const picks = [other.port];
    const s = redis(await startRedis({ pickPort: () => picks.shift() ?? candidatePort() }));
    expect(s.port).not.toBe(other.port);
    expect(await serverPid(s)).toBe(s.process.pid);
    expect(await serverPid(other)).toBe(other.process.pid);
  });

  it("a start that fails for another reason fails at once with redis-server's words", async () => {
    const t0 = Date.now();
    await expect(startRedis({ args: ["--no-such-directive", "1"] })).rejects.toThrow(
      /redis-server exited:.*no-such-directive/s,
    );
    expect(Date.now() - t0).toBeLessThan(20_000);
  });
});

describe("toxiproxy", () => {
  let toxi: ToxiproxyServer | undefined;
  afterEach(async () => {
    await toxi?.stop();
    toxi = undefined;
  });

  it("binds port 0 for its API and is found there; a proxy can be re-pointed", async () => {
    toxi = await startToxiproxy();
    const apiPort = Number(new URL(toxi.url).port);
    expect(listeningPorts(toxi.process.pid) ?? [apiPort]).toEqual([apiPort]);
    const a = redis(await startRedis());
    const b = redis(await startRedis());
    const { port } = await toxi.proxy("p", `127.0.0.1:${a.port}`);
    const { Redis } = await import("ioredis");
    const pidVia = async () => {
      const c = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, lazyConnect: true });
      c.on("error", () => {});
      try {
        await c.connect();
        return Number(/^process_id:(\d+)/m.exec(String(await c.info("server")))?.[1]);
      } finally {
        c.disconnect();
      }
    };
    expect(await pidVia()).toBe(a.process.pid);
    await toxi.setUpstream("p", `127.0.0.1:${b.port}`);
    expect(await pidVia()).toBe(b.process.pid);
    expect((await toxi.api.get("p")).listen).toBe(`127.0.0.1:${port}`);
  });
});
