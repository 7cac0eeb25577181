// Example: a WebSocket endpoint metered by the StreamLimiter. The tenant comes
// from the `x-tenant-id` header or the `tenant` query parameter (header wins);
// a missing or invalid tenant is refused with HTTP 400 before the upgrade.
// Every ~250 ms the server tells the client what it has admitted so far
// (`{"admittedFrames":…,"admittedBytes":…}`, a text frame, not metered), and
// `GET /metrics` serves the Prometheus metrics. Loopback only by default.
import { KEY_MAX_LENGTH, KEY_PATTERN, type RegionStore, type Timing } from "@geoquota/core";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { PolicySet } from "@geoquota/config";
import { connectRegionRedis, createRedisStore } from "@geoquota/limiter";
import { Registry } from "prom-client";
import { type RawData, WebSocketServer } from "ws";
import type { FrameInfo } from "./metered-connection.js";
import { StreamLimiter, type StreamLimiterOptions } from "./stream-limiter.js";

export interface ExampleServerOptions
  extends Omit<StreamLimiterOptions, "store" | "registry" | "policies" | "regions" | "regionId"> {
  readonly policies: PolicySet;
  /** Region ids (default `[regionId]`: a single-region setup). */
  readonly regions?: readonly string[];
  readonly regionId: string;
  /** A ready store, or the region's Redis URL (connection owned and closed by the server). */
  readonly store?: RegionStore;
  readonly redisUrl?: string;
  /** ε and D of the region config (defaults 250 ms, 3000 ms). */
  readonly timing?: Timing;
  readonly host?: string;
  /** 0 picks a free port (default). */
  readonly port?: number;
  readonly registry?: Registry;
  /** Called for every admitted frame (tests record admissions here). */
  readonly onFrame?: (tenant: string, data: RawData, info: FrameInfo) => void;
  /** Admission reports to the client, ms (default 250; 0 disables). */
  readonly reportIntervalMs?: number;
}

export interface ExampleServer {
  /** `ws://host:port/stream` */
  readonly url: string;
  /** `http://host:port/metrics` */
  readonly metricsUrl: string;
  readonly limiter: StreamLimiter;
  readonly wss: WebSocketServer;
  close(): Promise<void>;
}

/** The tenant of an upgrade request, or undefined when missing/invalid. */
export function tenantOf(req: IncomingMessage): string | undefined {
  const header = req.headers["x-tenant-id"];
  const h = Array.isArray(header) ? header[0] : header;
  const fromHeader = h === "" ? undefined : h;
  const url = new URL(req.url ?? "/", "http://localhost");
  const t = fromHeader ?? url.searchParams.get("tenant") ?? undefined;
  if (t === undefined || t.length === 0 || t.length > KEY_MAX_LENGTH || !KEY_PATTERN.test(t))
    return undefined;
  return t;
}

export async function startExampleServer(options: ExampleServerOptions): Promise<ExampleServer> {
  let store = options.store;
  let ownedRedis: ReturnType<typeof connectRegionRedis> | undefined;
  if (store === undefined) {
    if (options.redisUrl === undefined) throw new TypeError("startExampleServer: store or redisUrl required");
    ownedRedis = connectRegionRedis(options.redisUrl);
    store = createRedisStore({
      redis: ownedRedis,
      region: options.regionId,
      timing: options.timing ?? { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
    });
  }
  const finalStore: RegionStore = store;
  const registry = options.registry ?? new Registry();
  const frameBytesMax = options.frameBytesMax ?? 1024 * 1024;
  const limiter = new StreamLimiter({
    ...options,
    store: finalStore,
    registry,
    regions: options.regions ?? [options.regionId],
    frameBytesMax,
  });
  // ws enforces the same payload cap while parsing (1009), before we see the frame.
  const wss = new WebSocketServer({ noServer: true, maxPayload: frameBytesMax });
  const http = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/metrics") {
      registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    res.writeHead(404).end();
  });
  http.on("upgrade", (req, socket, head) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const tenant = tenantOf(req);
    if (path !== "/stream" || tenant === undefined) {
      socket.end(
        `HTTP/1.1 ${path !== "/stream" ? "404 Not Found" : "400 Bad Request"}\r\nconnection: close\r\n\r\n`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const r = limiter.attach(ws, {
        tenant,
        onFrame: (data, _isBinary, info) => options.onFrame?.(tenant, data, info),
      });
      if (!r.ok) return;
      const every = options.reportIntervalMs ?? 250;
      if (every > 0) {
        const timer = setInterval(() => {
          const s = r.connection.stats();
          // Reports are small and rare; skip one if the client is not reading.
          if (ws.bufferedAmount < 64 * 1024)
            ws.send(
              JSON.stringify({
                admittedFrames: s.admittedFrames,
                admittedBytes: s.admittedBytes,
                paused: s.paused,
              }),
            );
        }, every);
        ws.once("close", () => clearInterval(timer));
      }
    });
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `ws://${shown}:${port}/stream`,
    metricsUrl: `http://${shown}:${port}/metrics`,
    limiter,
    wss,
    close() {
      closing ??= (async () => {
        await limiter.close();
        for (const ws of wss.clients) ws.terminate();
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
        if (ownedRedis !== undefined) {
          await finalStore.close();
          await ownedRedis.quit().catch(() => ownedRedis?.disconnect());
        }
      })();
      return closing;
    },
  };
}
