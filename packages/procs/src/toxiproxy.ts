import { createWriteStream } from "node:fs";
import { type Proxy as ToxiProxy, Toxiproxy } from "toxiproxy-node-client";
import { findBinary } from "./binaries.js";
import { bindRetrying, freePort, listeningPorts, PortTakenError } from "./ports.js";
import { type ManagedProcess, spawnManaged } from "./processes.js";
import { waitFor } from "./wait.js";

export interface ToxiproxyServer {
  /** REST API base, `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly api: Toxiproxy;
  readonly process: ManagedProcess;
  /**
   * Creates a proxy listening on a free loopback port in front of
   * `upstream` (`host:port`). Returns the proxy and its listen port.
   */
  proxy(name: string, upstream: string): Promise<{ proxy: ToxiProxy; port: number; listen: string }>;
  /** Points proxy `name` at another upstream (`host:port`), keeping its listen address and state. */
  setUpstream(name: string, upstream: string): Promise<void>;
  /** Removes every toxic and re-enables every proxy (between tests). */
  reset(): Promise<void>;
  /**
   * Ends the server with SIGQUIT, on which the Go runtime writes every goroutine's
   * stack to stderr: all of it goes to `file` (the kept output is only its last
   * 64 KB). For a server that stopped answering (a deadlock: docs/soak-30m.md).
   * False when the server had already exited.
   */
  dumpGoroutines(file: string): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * The HTTP API's port: the server binds port 0 itself and the port is read
 * from /proc (no port handed over, none to lose). Where /proc is not readable
 * a free port is picked and tried, as before (a start that loses it retries).
 */
async function launch(binary: string, host: string): Promise<{ proc: ManagedProcess; port: number }> {
  const viaProc = listeningPorts(process.pid) !== undefined;
  const picked = viaProc ? 0 : await freePort(host);
  const proc = spawnManaged(binary, ["-host", host, "-port", String(picked)]);
  let port = picked;
  try {
    await waitFor(`toxiproxy on ${host}`, async () => {
      if (proc.child.exitCode !== null) throw new Error(`toxiproxy exited: ${proc.output().trim()}`);
      if (viaProc) {
        // Its only listener until proxies are made: the API.
        const ports = listeningPorts(proc.pid) ?? [];
        if (ports.length !== 1) return false;
        port = ports[0]!;
      }
      const res = await fetch(`http://${host}:${port}/version`);
      return res.ok;
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { proc, port };
}

/** Starts the real Toxiproxy server (never a stand-in) on a free loopback port. */
export async function startToxiproxy(host = "127.0.0.1"): Promise<ToxiproxyServer> {
  const binary = findBinary("toxiproxy-server");
  let started: { proc: ManagedProcess; port: number } | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5 && !started; attempt++) {
    try {
      started = await launch(binary, host);
    } catch (err) {
      lastError = err;
    }
  }
  if (!started) throw lastError instanceof Error ? lastError : new Error("startToxiproxy failed");
  const url = `http://${host}:${started.port}`;
  const api = new Toxiproxy(url);
  const managed = started.proc;
  return {
    url,
    api,
    process: managed,
    async proxy(name, upstream) {
      // Not port 0: a proxy disabled and enabled again (a cut link) re-binds
      // its listen address, so it gets a port outside the ephemeral range,
      // which no outgoing connection can take meanwhile; Toxiproxy binds it
      // at once and says so when it is taken, and another is tried.
      return await bindRetrying(`toxiproxy proxy ${name}`, async (listenPort) => {
        const listen = `${host}:${listenPort}`;
        // By hand: the client drops the server's error body, which names the taken port.
        const res = await fetch(`${url}/proxies`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name, listen, upstream, enabled: true }),
        });
        const text = await res.text();
        if (!res.ok) {
          if (/address already in use/i.test(text)) throw new PortTakenError(listenPort, text);
          throw new Error(
            `toxiproxy: creating proxy ${name} (${listen} → ${upstream}): ${res.status} ${text}`,
          );
        }
        return { proxy: await api.get(name), port: listenPort, listen };
      });
    },
    async setUpstream(name, next) {
      const p = await api.get(name);
      await p.update({ enabled: p.enabled, listen: p.listen, upstream: next });
    },
    async reset() {
      await api.reset();
    },
    async dumpGoroutines(file) {
      const { child } = managed;
      if (child.exitCode !== null || child.signalCode !== null) return false;
      const out = createWriteStream(file);
      const write = (chunk: Buffer) => out.write(chunk);
      child.stdout?.on("data", write);
      child.stderr?.on("data", write);
      child.kill("SIGQUIT");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await managed.exited;
      clearTimeout(timer);
      await new Promise<void>((resolve) => out.end(resolve));
      return true;
    },
    async stop() {
      await managed.stop();
    },
  };
}
