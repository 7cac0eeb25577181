import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { connect } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import { findBinary } from "./binaries.js";
import { bindRetrying, PortTakenError } from "./ports.js";
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
  /** The server's own scratch directory (`--dir`): its working directory, removed by `stop()`. */
  readonly dir: string;
  /**
   * Starts a new redis-server on the same port: fresh and empty (a new scratch
   * directory), or with `keepState` after a `SHUTDOWN SAVE` (every write kept)
   * from its dump in the same directory, as a clean restart of a persistent server.
   */
  restart(options?: { keepState?: boolean }): Promise<void>;
  /** SIGSTOP: the server stays connected but answers nothing (a stalled replica). */
  pause(): void;
  /** SIGCONT after `pause()`. stop/kill/restart resume a paused server first. */
  resume(): void;
}

export interface StartRedisOptions {
  host?: string;
  /** Extra `redis-server` arguments, e.g. `["--maxmemory", "64mb"]`. */
  args?: readonly string[];
  /** Where candidate ports come from (default `candidatePort`); tests of the retry pass taken ones. */
  pickPort?: () => number;
  /** Another redis-server binary (default: `redis-server` found on PATH). */
  binary?: string;
  /** Extra environment of the server process (e.g. libfaketime's LD_PRELOAD for a clock-fault test). */
  env?: Readonly<Record<string, string>>;
}

interface LaunchOptions {
  readonly binary: string | undefined;
  readonly env: Readonly<Record<string, string>> | undefined;
}

/**
 * Scratch directories of servers not yet stopped, removed at exit too: a
 * server started in the caller's cwd could leave a `dump.rdb` there (a
 * replica's disk load, a SAVE, a shutdown with save points) that every later
 * "fresh" server started in that cwd would load.
 */
const scratchDirs = new Set<string>();
let exitHookInstalled = false;

function scratchDir(): string {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => {
      for (const d of scratchDirs) rmSync(d, { recursive: true, force: true });
    });
  }
  const dir = mkdtempSync(join(tmpdir(), "gq-redis-"));
  scratchDirs.add(dir);
  return dir;
}

function removeScratch(dir: string): void {
  scratchDirs.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

interface Launched {
  readonly proc: ManagedProcess;
  readonly dir: string;
}

/**
 * The process id of the Redis server on host:port (INFO server, inline
 * protocol, one short-lived socket): null while it is loading or refuses;
 * throws when nothing answers within `timeoutMs` (whatever else holds the
 * port must not hang the wait) or the connection fails.
 */
function redisPid(host: string, port: number, timeoutMs = 2000): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let text = "";
    const finish = (err: Error | null, pid: number | null = null) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(pid);
    };
    const timer = setTimeout(
      () => finish(new Error(`no answer on ${host}:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.once("error", (err) => finish(err));
    socket.once("connect", () => socket.write("INFO server\r\n"));
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (text.startsWith("-")) return finish(null); // -LOADING and the like: not yet
      const m = /process_id:(\d+)/.exec(text);
      if (m) finish(null, Number(m[1]));
    });
    socket.once("end", () => finish(new Error(`${host}:${port} closed the connection`)));
  });
}

// A start on a loaded 2-core machine can take seconds; this is only the bound for a hung one.
const startTimeoutMs = 30_000;

async function launch(
  host: string,
  port: number,
  args: readonly string[],
  how: LaunchOptions = { binary: undefined, env: undefined },
  reuseDir?: string,
): Promise<Launched> {
  const dir = reuseDir ?? scratchDir();
  // `--dir` first: a caller's own `--dir` in `args` (a cluster's nodes directory) comes later and wins.
  const serverArgs = [
    "--dir",
    dir,
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
  ];
  const proc = spawnManaged(how.binary ?? findBinary("redis-server"), serverArgs, how.env ?? {});
  // redis-server cannot bind port 0: it is given a port, and exits when that
  // is taken. Polled by hand (not waitFor, which would keep polling a process
  // that already exited): an exit ends the wait at once.
  const exited = () => proc.child.exitCode !== null || proc.child.signalCode !== null;
  const exitError = () =>
    /Address already in use/i.test(proc.output())
      ? new PortTakenError(port, proc.output().trim().split("\n")[0] ?? "")
      : new Error(`redis-server exited: ${proc.output().trim()}`);
  const deadline = Date.now() + startTimeoutMs;
  try {
    for (;;) {
      if (exited()) throw exitError();
      let lastError: unknown;
      try {
        const pid = await redisPid(host, port);
        // The server answering must be ours, not one that took the port first
        // (ours then exits on the bind): its process id says so.
        if (pid === proc.pid) break;
        await Promise.race([proc.exited, new Promise((r) => setTimeout(r, 5000))]);
        throw exited()
          ? exitError()
          : new PortTakenError(port, `answered by another redis-server (pid ${pid})`);
      } catch (err) {
        if (exited()) throw exitError();
        if (err instanceof PortTakenError) throw err;
        lastError = err;
      }
      if (Date.now() > deadline) {
        const why = lastError instanceof Error ? `: ${lastError.message}` : "";
        throw new Error(
          `timed out after ${startTimeoutMs} ms waiting for redis-server on ${host}:${port}${why}`,
        );
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  } catch (err) {
    await proc.stop();
    removeScratch(dir);
    throw err;
  }
  return { proc, dir };
}

/**
 * Starts a `redis-server` with no persistence on a free loopback port and
 * waits until it answers PING (as itself: its process id). The port is one
 * below the ephemeral range (no outgoing connection can take it, so a restart
 * on it is safe too), and another is tried when a bind finds it taken.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const host = options.host ?? "127.0.0.1";
  const args = options.args ?? [];
  const how: LaunchOptions = { binary: options.binary, env: options.env };
  const { port, launched: proc } = await bindRetrying(
    `redis-server on ${host}`,
    async (p) => ({ port: p, launched: await launch(host, p, args, how) }),
    20,
    options.pickPort,
  );
  let current = proc.proc;
  let dir = proc.dir;
  const clients = new Set<Redis>();
  const closeClients = () => {
    for (const c of clients) c.disconnect();
    clients.clear();
  };
  let paused = false;
  const resume = () => {
    if (!paused) return;
    paused = false;
    if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill("SIGCONT");
  };
  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    get process() {
      return current;
    },
    get dir() {
      return dir;
    },
    client() {
      const c = new Redis({ host, port, maxRetriesPerRequest: 1 });
      c.on("error", () => {});
      clients.add(c);
      return c;
    },
    async stop() {
      closeClients();
      resume();
      await current.stop();
      removeScratch(dir);
    },
    async kill() {
      resume();
      current.child.kill("SIGKILL");
      await current.exited;
    },
    pause() {
      paused = true;
      current.child.kill("SIGSTOP");
    },
    resume,
    async restart(options = {}) {
      resume();
      const running = () => current.child.exitCode === null && current.child.signalCode === null;
      if (options.keepState) {
        if (running()) {
          // SHUTDOWN SAVE writes the dump as the server's last act: no write is lost.
          const c = new Redis({ host, port, maxRetriesPerRequest: 0, lazyConnect: true });
          c.on("error", () => {});
          await c.connect();
          await c.call("SHUTDOWN", "SAVE").catch(() => {}); // the connection closes as it exits
          c.disconnect();
          await current.exited;
        }
        const next = await launch(host, port, args, how, dir);
        current = next.proc;
        return;
      }
      if (running()) await current.stop();
      // A new directory: whatever the old server wrote (a killed replica's dump) is not loaded.
      removeScratch(dir);
      const next = await launch(host, port, args, how);
      current = next.proc;
      dir = next.dir;
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

/** `role`, `master_link_status` and per-replica `state` from INFO replication. */
function replicationField(text: string, name: string): string {
  return new RegExp(`^${name}:(.*)$`, "m").exec(text)?.[1]?.trim() ?? "";
}

/**
 * Starts a `redis-server --replicaof <primary>` (no persistence) and waits
 * until the initial sync is done: the replica's link is up and the primary
 * lists it `online`, so a `WAIT 1` on the primary can succeed. Sets the
 * primary's `repl-diskless-sync-delay` to 0 (the default 5 s would delay the sync).
 * `via` is the address the replica dials instead of the primary's (a proxy in
 * front of it): attached through it from the start, the primary's replica
 * count rises once, where a later `REPLICAOF` would drop and re-add it.
 */
export async function startReplica(
  primary: RedisServer,
  options: StartRedisOptions & { via?: { host: string; port: number } } = {},
): Promise<RedisServer> {
  const { via, ...redisOptions } = options;
  const admin = primary.client();
  await admin.config("SET", "repl-diskless-sync-delay", "0");
  const replica = await startRedis({
    ...redisOptions,
    // Load the initial sync from the socket (no temporary dump.rdb in its directory to wait on).
    args: [
      "--replicaof",
      via?.host ?? primary.host,
      String(via?.port ?? primary.port),
      "--repl-diskless-load",
      "on-empty-db",
      ...(options.args ?? []),
    ],
  });
  const probe = replica.client();
  try {
    await waitFor(`replica on ${replica.port} synced with ${primary.port}`, async () => {
      const r = await probe.info("replication");
      return replicationField(r, "master_link_status") === "up";
    });
    // Linked is not enough: until the replica's first acknowledgement the
    // primary's WAIT does not count it. Wait for an ack past a fresh write.
    await admin.set("testkit:replica-sync", String(replica.port));
    const target = Number(replicationField(await admin.info("replication"), "master_repl_offset"));
    const line = new RegExp(`^slave\\d+:ip=[^,]*,port=${replica.port},state=online,offset=(\\d+)`, "m");
    await waitFor(`replica on ${replica.port} acknowledging ${primary.port}`, async () => {
      const m = line.exec(await admin.info("replication"));
      return m !== null && Number(m[1]) >= target;
    });
    await admin.del("testkit:replica-sync");
  } catch (err) {
    await replica.stop();
    throw err;
  } finally {
    probe.disconnect();
    admin.disconnect();
  }
  return replica;
}
