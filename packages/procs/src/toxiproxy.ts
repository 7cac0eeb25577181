import { type Proxy as ToxiProxy, Toxiproxy } from "toxiproxy-node-client";
import { findBinary } from "./binaries.js";
import { freePort } from "./ports.js";
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
  /** Removes every toxic and re-enables every proxy (between tests). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the real Toxiproxy server (never a stand-in) on a free loopback port. */
export async function startToxiproxy(host = "127.0.0.1"): Promise<ToxiproxyServer> {
  const binary = findBinary("toxiproxy-server");
  let proc: ManagedProcess | undefined;
  let port = 0;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5 && !proc; attempt++) {
    port = await freePort(host);
    const p = spawnManaged(binary, ["-host", host, "-port", String(port)]);
    try {
      await waitFor(`toxiproxy on ${host}:${port}`, async () => {
        if (p.child.exitCode !== null) throw new Error(`toxiproxy exited: ${p.output().trim()}`);
        const res = await fetch(`http://${host}:${port}/version`);
        return res.ok;
      });
      proc = p;
    } catch (err) {
      lastError = err;
      await p.stop();
    }
  }
  if (!proc) throw lastError instanceof Error ? lastError : new Error("startToxiproxy failed");
  const url = `http://${host}:${port}`;
  const api = new Toxiproxy(url);
  const managed = proc;
  return {
    url,
    api,
    process: managed,
    async proxy(name, upstream) {
      for (let attempt = 0; ; attempt++) {
        const listenPort = await freePort(host);
        const listen = `${host}:${listenPort}`;
        try {
          const proxy = await api.createProxy({ name, listen, upstream });
          return { proxy, port: listenPort, listen };
        } catch (err) {
          if (attempt >= 4) throw err;
        }
      }
    },
    async reset() {
      await api.reset();
    },
    async stop() {
      await managed.stop();
    },
  };
}
