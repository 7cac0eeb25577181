// A region's end of the gossip mesh: one authenticated WebSocket link per
// peer, the smaller region id dials, the larger accepts.
import { readFile } from "node:fs/promises";
import { type Server as HttpServer, createServer as createHttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { performance } from "node:perf_hooks";
import { Registry } from "prom-client";
import { type ClientOptions, type ServerOptions, WebSocket, WebSocketServer } from "ws";
import { backoffDelayMs } from "./backoff.js";
import { listenServer } from "@geoquota/edge";
import { type MeshConfig, type MeshConfigInput, dialsTo, parseMeshConfig, peerUrlSchema } from "./config.js";
import { type PeerDownReason, TRANSPORT_ERRORS, localReason } from "./errors.js";
import { Link } from "./link.js";
import { type TransportLogger, silentLogger } from "./logger.js";
import { type DropReason, type TransportMetrics, createTransportMetrics } from "./metrics.js";
import { acceptSession, dialSession, type SessionResult } from "./session.js";
import { TokenBucket } from "./token-bucket.js";

export interface MeshHandlers {
  /** A binary data frame from an authenticated peer. The bytes are the caller's to keep. */
  onFrame?(peer: string, bytes: Uint8Array): void;
  onPeerUp?(peer: string): void;
  onPeerDown?(peer: string, reason: PeerDownReason): void;
  /** A handshake failed; `peer` is null when the remote never named a configured peer. */
  onHandshakeFailure?(peer: string | null, reason: PeerDownReason): void;
}

export interface MeshDeps {
  handlers?: MeshHandlers;
  /** Default: silent. */
  logger?: TransportLogger;
  /** Default: a private Registry (so several meshes can live in one process). */
  registry?: Registry;
  /** Monotonic milliseconds, for heartbeat, RTT and the inbound rate limit. Default performance.now. */
  now?: () => number;
  /** [0, 1) for backoff jitter. Default Math.random. */
  random?: () => number;
}

export type DropCounts = Record<DropReason, number>;

export interface PeerStatus {
  id: string;
  /** Our side of the link: "dialer" when our id is the smaller one. */
  role: "dialer" | "acceptor";
  connected: boolean;
  /** Epoch ms of the last up/down transition; null before the first link. */
  since: number | null;
  /** Last ping/pong round trip; null until measured. */
  rttMs: number | null;
  /** Cumulative over all links to this peer. framesIn counts frames later dropped too. */
  bytesIn: number;
  bytesOut: number;
  framesIn: number;
  framesOut: number;
  drops: DropCounts;
  /** Redials scheduled (dialer side only). */
  reconnects: number;
  /** Why the last link went down or the last handshake failed. */
  lastError: PeerDownReason | null;
}

interface PeerState {
  readonly id: string;
  /** Undefined until known (see MeshConfig peers); replaced by setPeerUrl. */
  url: string | undefined;
  readonly dials: boolean;
  readonly bucket: TokenBucket;
  link: Link | null;
  dialing: WebSocket | null;
  redialTimer: NodeJS.Timeout | null;
  attempt: number;
  since: number | null;
  rttMs: number | null;
  bytesIn: number;
  bytesOut: number;
  framesIn: number;
  framesOut: number;
  drops: DropCounts;
  reconnects: number;
  lastError: PeerDownReason | null;
}

type State = "idle" | "starting" | "running" | "stopping" | "stopped";

interface TlsMaterial {
  key: Buffer;
  cert: Buffer;
  ca: Buffer;
}

// Handshake failures that say nothing about the peer's config or honesty.
const QUIET_FAILURES = new Set(["GQ_ERR_CONNECTION_LOST", "GQ_ERR_SHUTDOWN"]);

export class Mesh {
  readonly config: MeshConfig;
  readonly metrics: TransportMetrics;
  private readonly handlers: MeshHandlers;
  private readonly log: TransportLogger;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly peerStates = new Map<string, PeerState>();
  /** Every socket from creation to its 'close' event, so stop() can wait for all. */
  private readonly sockets = new Map<WebSocket, Promise<void>>();
  private state: State = "idle";
  private server: HttpServer | null = null;
  private wss: WebSocketServer | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private tls: TlsMaterial | null = null;
  private pendingAccepts = 0;
  private stopPromise: Promise<void> | null = null;
  private boundPort: number | null = null;

  constructor(config: MeshConfigInput, deps: MeshDeps = {}) {
    this.config = parseMeshConfig(config);
    this.handlers = deps.handlers ?? {};
    this.log = deps.logger ?? silentLogger;
    this.now = deps.now ?? (() => performance.now());
    this.random = deps.random ?? Math.random;
    const c = this.config;
    this.metrics = createTransportMetrics(
      deps.registry ?? new Registry(),
      c.peers.map((p) => p.id),
    );
    const burst = c.inboundFramesBurstMax ?? Math.max(1, Math.ceil(c.inboundFramesPerSecondMax));
    for (const p of c.peers) {
      this.peerStates.set(p.id, {
        id: p.id,
        url: p.url,
        dials: dialsTo(c.self, p.id),
        bucket: new TokenBucket(c.inboundFramesPerSecondMax, burst, this.now),
        link: null,
        dialing: null,
        redialTimer: null,
        attempt: 0,
        since: null,
        rttMs: null,
        bytesIn: 0,
        bytesOut: 0,
        framesIn: 0,
        framesOut: 0,
        drops: { rate_limited: 0, handler_error: 0, link_down: 0, backpressure: 0, oversize: 0 },
        reconnects: 0,
        lastError: null,
      });
    }
  }

  get self(): string {
    return this.config.self;
  }

  /** The bound port (useful with listen.port 0). Throws before start(). */
  port(): number {
    if (this.boundPort === null) throw new Error("Mesh.port(): not listening");
    return this.boundPort;
  }

  /** Listens, then dials the peers this region dials. Resolves once listening; links come up asynchronously. */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new Error(`Mesh.start(): already ${this.state}`);
    this.state = "starting";
    const c = this.config;
    try {
      if (c.tls) {
        const [key, cert, ca] = await Promise.all([
          readFile(c.tls.keyPath),
          readFile(c.tls.certPath),
          readFile(c.tls.caPath),
        ]);
        this.tls = { key, cert, ca };
      }
      const server = this.tls
        ? createHttpsServer({ ...this.tls, requestCert: true, rejectUnauthorized: true })
        : createHttpServer();
      server.on("tlsClientError", (err) =>
        this.handshakeFailed(null, localReason("GQ_ERR_TLS", err.message.slice(0, 200))),
      );
      // Bound how long a connection may sit before its upgrade (slowloris).
      server.headersTimeout = c.handshakeTimeoutMs;
      server.requestTimeout = c.handshakeTimeoutMs;
      this.server = server;
      const wssOptions: ServerOptions & { closeTimeout: number } = {
        server,
        maxPayload: c.frameBytesMax,
        perMessageDeflate: false,
        clientTracking: false,
        closeTimeout: c.closeGraceMs,
      };
      const wss = new WebSocketServer(wssOptions);
      this.wss = wss;
      wss.on("connection", (ws) => this.accept(ws));
      wss.on("error", (err) => this.log.error({ err }, "gossip transport: server error"));
      this.boundPort = await listenServer(server, c.listen.host, c.listen.port, {
        anyPortIfTaken: c.listen.anyPortIfTaken,
      });
    } catch (err) {
      this.state = "stopped";
      this.wss?.close();
      this.server?.close();
      throw err;
    }
    this.state = "running";
    this.heartbeat = setInterval(() => this.tick(), c.heartbeatMs);
    for (const p of this.peerStates.values()) if (p.dials) this.dial(p);
    this.log.info({ self: c.self, port: this.boundPort }, "gossip transport: listening");
  }

  /**
   * Gives (or changes) the address of a peer: a peer whose address was not
   * known at construction, or one that now listens elsewhere (restarted on
   * another port). A dialer dials it now instead of waiting out its backoff;
   * an up link stays up (a peer that moved drops it itself).
   */
  setPeerUrl(peerId: string, url: string): void {
    const p = this.peerStates.get(peerId);
    if (!p) throw new Error(`Mesh.setPeerUrl(): ${peerId} is not a configured peer`);
    if (!peerUrlSchema.safeParse(url).success)
      throw new Error(`Mesh.setPeerUrl(): ${url} is not a ws:// or wss:// URL`);
    if (url.startsWith("wss:") !== (this.config.tls !== undefined)) {
      const why = this.config.tls ? "tls is configured: expected wss://" : "wss:// needs the tls config";
      throw new Error(`Mesh.setPeerUrl(): ${url}: ${why}`);
    }
    if (p.url === url) return;
    p.url = url;
    if (!p.dials || p.link || p.dialing) return;
    if (p.redialTimer) {
      clearTimeout(p.redialTimer);
      p.redialTimer = null;
    }
    p.attempt = 0;
    this.dial(p);
  }

  /** Closes every link (GQ_ERR_SHUTDOWN), the server and all timers. Idempotent. */
  stop(): Promise<void> {
    if (this.stopPromise) return this.stopPromise;
    this.stopPromise = this.doStop();
    return this.stopPromise;
  }

  /**
   * Sends one binary frame. False (and counted) when the link is down, the
   * frame exceeds frameBytesMax, or the socket already buffers too much:
   * nothing is ever queued here. The bytes are copied.
   */
  send(peerId: string, bytes: Uint8Array): boolean {
    const p = this.peerStates.get(peerId);
    if (!p) throw new Error(`Mesh.send(): ${peerId} is not a configured peer`);
    return this.sendTo(p, bytes, null);
  }

  /** Sends to every connected peer; returns how many accepted the frame. */
  broadcast(bytes: Uint8Array): number {
    const copy = Buffer.from(bytes); // one copy shared by all peers
    let sent = 0;
    for (const p of this.peerStates.values()) if (this.sendTo(p, bytes, copy)) sent += 1;
    return sent;
  }

  isUp(peerId: string): boolean {
    return this.peerStates.get(peerId)?.link != null;
  }

  peers(): PeerStatus[] {
    return [...this.peerStates.values()].map((p) => ({
      id: p.id,
      role: p.dials ? "dialer" : "acceptor",
      connected: p.link !== null,
      since: p.since,
      rttMs: p.rttMs,
      bytesIn: p.bytesIn,
      bytesOut: p.bytesOut,
      framesIn: p.framesIn,
      framesOut: p.framesOut,
      drops: { ...p.drops },
      reconnects: p.reconnects,
      lastError: p.lastError,
    }));
  }

  // ---- sending -------------------------------------------------------------

  private sendTo(p: PeerState, bytes: Uint8Array, shared: Buffer | null): boolean {
    const link = p.link;
    if (link === null || !link.open) return this.drop(p, "link_down");
    if (bytes.byteLength > this.config.frameBytesMax) return this.drop(p, "oversize");
    if (link.bufferedAmount + bytes.byteLength > this.config.sendBufferedBytesMax)
      return this.drop(p, "backpressure");
    // Copy: callers may reuse their encode buffer, and ws keeps a reference until written.
    link.send(shared ?? Buffer.from(bytes));
    p.framesOut += 1;
    p.bytesOut += bytes.byteLength;
    this.metrics.framesOut.inc({ peer: p.id });
    this.metrics.bytesOut.inc({ peer: p.id }, bytes.byteLength);
    return true;
  }

  private drop(p: PeerState, reason: DropReason): false {
    p.drops[reason] += 1;
    this.metrics.framesDropped.inc({ peer: p.id, reason });
    return false;
  }

  // ---- connections ---------------------------------------------------------

  private track(ws: WebSocket): void {
    const closed = new Promise<void>((resolve) => ws.once("close", () => resolve()));
    this.sockets.set(ws, closed);
    closed.then(() => this.sockets.delete(ws));
    // A socket must always have an 'error' listener, or ws errors crash the process.
    ws.on("error", (err) => this.log.debug({ err: err.message }, "gossip transport: socket error"));
  }

  private clientOptions(): ClientOptions & { closeTimeout: number } {
    const c = this.config;
    const base = {
      maxPayload: c.frameBytesMax,
      perMessageDeflate: false,
      handshakeTimeout: c.handshakeTimeoutMs,
      followRedirects: false,
      closeTimeout: c.closeGraceMs,
    };
    return this.tls ? { ...base, ...this.tls, rejectUnauthorized: true } : base;
  }

  private dial(p: PeerState): void {
    if (this.state !== "running" || p.dialing || p.link || p.url === undefined) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(p.url, this.clientOptions());
    } catch (err) {
      // The URL was validated by the config schema; this is a bug, but a redial loop must not die of it.
      this.log.error({ peer: p.id, err }, "gossip transport: dial failed");
      this.scheduleRedial(p);
      return;
    }
    this.track(ws);
    p.dialing = ws;
    const c = this.config;
    dialSession(
      ws,
      {
        self: c.self,
        secret: c.secret,
        version: c.protocolVersion,
        timeoutMs: c.handshakeTimeoutMs,
        peer: p.id,
      },
      (r) => {
        p.dialing = null;
        if (r.ok) this.adopt(p, ws, r);
        else {
          this.handshakeFailed(r.peer, r.reason);
          this.scheduleRedial(p);
        }
      },
    );
  }

  private scheduleRedial(p: PeerState): void {
    if (this.state !== "running" || p.redialTimer || p.dialing || p.link || p.url === undefined) return;
    const { baseMs, capMs } = this.config.reconnect;
    const delayMs = backoffDelayMs(p.attempt, baseMs, capMs, this.random);
    p.attempt += 1;
    p.reconnects += 1;
    this.metrics.reconnects.inc({ peer: p.id });
    p.redialTimer = setTimeout(() => {
      p.redialTimer = null;
      this.dial(p);
    }, delayMs);
  }

  private accept(ws: WebSocket): void {
    this.track(ws);
    const c = this.config;
    if (this.state !== "running") {
      ws.close(TRANSPORT_ERRORS.GQ_ERR_SHUTDOWN.closeCode, "GQ_ERR_SHUTDOWN");
      return;
    }
    if (this.pendingAccepts >= c.pendingHandshakesMax) {
      ws.close(TRANSPORT_ERRORS.GQ_ERR_OVERLOADED.closeCode, "GQ_ERR_OVERLOADED");
      this.handshakeFailed(null, localReason("GQ_ERR_OVERLOADED", "too many pending handshakes"));
      return;
    }
    this.pendingAccepts += 1;
    acceptSession(
      ws,
      {
        self: c.self,
        secret: c.secret,
        version: c.protocolVersion,
        timeoutMs: c.handshakeTimeoutMs,
        isPeer: (id) => this.peerStates.has(id),
        dialsUs: (id) => dialsTo(id, c.self),
      },
      (r) => {
        this.pendingAccepts -= 1;
        if (!r.ok) return this.handshakeFailed(r.peer, r.reason);
        const p = this.peerStates.get(r.peer);
        if (p) this.adopt(p, ws, r);
      },
    );
  }

  private handshakeFailed(peer: string | null, reason: PeerDownReason): void {
    const p = peer === null ? undefined : this.peerStates.get(peer);
    if (p) p.lastError = reason;
    const quiet = QUIET_FAILURES.has(reason.code);
    if (!quiet) this.metrics.handshakeFailures.inc({ reason: TRANSPORT_ERRORS[reason.code].reason });
    const fields = {
      peer,
      code: reason.code,
      closeCode: reason.closeCode,
      by: reason.by,
      detail: reason.detail,
    };
    if (quiet) this.log.debug(fields, "gossip transport: handshake failed");
    else this.log.warn(fields, "gossip transport: handshake failed");
    this.call("onHandshakeFailure", () => this.handlers.onHandshakeFailure?.(peer, reason));
  }

  /** An authenticated socket becomes the peer's link, replacing any older one. */
  private adopt(p: PeerState, ws: WebSocket, r: Extract<SessionResult, { ok: true }>): void {
    if (this.state !== "running") {
      r.tracker.close(localReason("GQ_ERR_SHUTDOWN", "stopping"));
      return;
    }
    const old = p.link;
    if (old) {
      // Only an authenticated connection may replace a link, so strangers cannot kick peers off.
      p.link = null;
      old.close(localReason("GQ_ERR_REPLACED", "newer connection from the same peer"));
      this.linkDown(p, old, localReason("GQ_ERR_REPLACED", "newer connection from the same peer"));
    }
    const link: Link = new Link(ws, r.tracker, this.config.heartbeatMs, this.now, {
      frame: (bytes) => this.onFrame(p, bytes),
      rtt: (ms) => {
        p.rttMs = ms;
        this.metrics.rttSeconds.set({ peer: p.id }, ms / 1000);
      },
      closed: (reason) => {
        if (p.link !== link) return; // replaced: already reported
        p.link = null;
        this.linkDown(p, link, reason);
        if (p.dials) this.scheduleRedial(p);
      },
    });
    p.link = link;
    p.since = Date.now();
    this.metrics.linkUp.set({ peer: p.id }, 1);
    this.log.info({ peer: p.id }, "gossip transport: link up");
    this.call("onPeerUp", () => this.handlers.onPeerUp?.(p.id));
  }

  private linkDown(p: PeerState, link: Link, reason: PeerDownReason): void {
    p.since = Date.now();
    p.lastError = reason;
    // A link that stayed up for a full backoff cap resets the backoff; a flapping one keeps backing off.
    if (this.now() - link.upAtMs >= this.config.reconnect.capMs) p.attempt = 0;
    this.metrics.linkUp.set({ peer: p.id }, 0);
    this.metrics.linkDowns.inc({ peer: p.id, reason: TRANSPORT_ERRORS[reason.code].reason });
    const fields = {
      peer: p.id,
      code: reason.code,
      closeCode: reason.closeCode,
      by: reason.by,
      detail: reason.detail,
    };
    this.log.info(fields, "gossip transport: link down");
    this.call("onPeerDown", () => this.handlers.onPeerDown?.(p.id, reason));
  }

  private onFrame(p: PeerState, bytes: Uint8Array): void {
    p.framesIn += 1;
    p.bytesIn += bytes.byteLength;
    this.metrics.framesIn.inc({ peer: p.id });
    this.metrics.bytesIn.inc({ peer: p.id }, bytes.byteLength);
    if (!p.bucket.take()) {
      this.drop(p, "rate_limited");
      return;
    }
    if (!this.call("onFrame", () => this.handlers.onFrame?.(p.id, bytes))) this.drop(p, "handler_error");
  }

  /** Runs a user handler; a throwing handler is logged, never allowed to break the transport. */
  private call(name: string, fn: () => void): boolean {
    try {
      fn();
      return true;
    } catch (err) {
      this.log.error({ err, handler: name }, "gossip transport: handler threw");
      return false;
    }
  }

  private tick(): void {
    for (const p of this.peerStates.values()) p.link?.tick();
  }

  private async doStop(): Promise<void> {
    if (this.state === "idle") {
      this.state = "stopped";
      return;
    }
    this.state = "stopping";
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    for (const p of this.peerStates.values()) {
      if (p.redialTimer) clearTimeout(p.redialTimer);
      p.redialTimer = null;
      p.link?.close(localReason("GQ_ERR_SHUTDOWN", "region stopping"));
    }
    const shutdown = TRANSPORT_ERRORS.GQ_ERR_SHUTDOWN.closeCode;
    for (const ws of this.sockets.keys()) {
      if (ws.readyState === ws.CONNECTING) ws.terminate();
      else if (ws.readyState === ws.OPEN) ws.close(shutdown, "GQ_ERR_SHUTDOWN: region stopping");
    }
    const server = this.server;
    const serverClosed = new Promise<void>((resolve) => {
      if (!server) return resolve();
      server.close(() => resolve());
    });
    this.wss?.close();
    // ws destroys each socket at most closeGraceMs after close(); the extra
    // margin covers a socket stuck in some other state.
    let graceTimer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      graceTimer = setTimeout(resolve, this.config.closeGraceMs + 500);
    });
    await Promise.race([Promise.all(this.sockets.values()), grace]);
    clearTimeout(graceTimer);
    for (const ws of this.sockets.keys()) ws.terminate();
    await Promise.all(this.sockets.values());
    server?.closeAllConnections();
    await serverClosed;
    this.state = "stopped";
    this.log.info({ self: this.config.self }, "gossip transport: stopped");
  }
}
