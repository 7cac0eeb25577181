// One metered WebSocket connection: every inbound frame pays one frame token
// and its payload size in byte tokens, first from the connection's own cap
// (LocalBucket), then from the tenant's shared leases (SharedBucket). While
// the frame at the head of the queue cannot be paid, the socket is paused:
// Node stops reading it, the kernel's receive window closes, and the client's
// writes stall (TCP backpressure). Nothing is dropped; frames are delivered in
// arrival order, each once it is fully paid.
//
// Why a queue at all: when we pause, ws has already read one socket chunk
// (≤ 64 KiB) and may still emit the messages in it. They wait here, in order.
// The queue is bounded by what one read can hold (plus one max-size frame);
// anything beyond that would be a bug, so it closes the connection instead of
// growing.
import type { MonotonicClock } from "@geoquota/limiter/internal";
import type { RawData, WebSocket } from "ws";
import type { LocalBucket } from "./local-bucket.js";
import type { StreamMetrics } from "./metrics.js";
import type { TenantQuota } from "./tenant-quota.js";

export type PauseReason = "connection" | "tenant" | "handler";

/** What the handler learns about each delivered frame. */
export interface FrameInfo {
  /** The connection's id, unique within its StreamLimiter. */
  readonly connectionId: number;
  /** 0, 1, 2, … per connection, in arrival order. */
  readonly index: number;
  /** Payload bytes (the byte cost). */
  readonly bytes: number;
  /** Monotonic ms when ws emitted the frame (it was read from the socket). */
  readonly readAtMs: number;
  /** Monotonic ms when its last token was paid. */
  readonly admittedAtMs: number;
}

/** Called once per frame, in order. A returned promise holds the next frame (and pauses reading) until it settles. */
export type FrameHandler = (data: RawData, isBinary: boolean, info: FrameInfo) => void | Promise<void>;

export interface ConnectionStats {
  readonly tenant: string;
  readonly paused: boolean;
  readonly pauseReason: PauseReason | undefined;
  readonly queuedFrames: number;
  readonly queuedBytes: number;
  readonly admittedFrames: number;
  readonly admittedBytes: number;
  readonly pauses: number;
}

/** Limits of one connection (resolved by the StreamLimiter). */
export interface ConnectionLimits {
  readonly frameBytesMax: number;
  readonly queueBytesMax: number;
  readonly queueFramesMax: number;
  /** Upper bound of one wait before re-checking tokens, ms. */
  readonly pollMaxMs: number;
  /** Estimates of the regional slice rates, per second: how long a wait for the tenant's tokens should be. */
  readonly sliceBytesPerSecond: number;
  readonly sliceFramesPerSecond: number;
}

export interface ConnectionDeps {
  readonly id: number;
  readonly ws: WebSocket;
  readonly tenant: string;
  readonly tenantClass: string;
  readonly quota: TenantQuota;
  readonly local: { readonly bytes: LocalBucket; readonly frames: LocalBucket };
  readonly limits: ConnectionLimits;
  readonly metrics: StreamMetrics;
  readonly clock: MonotonicClock;
  readonly onFrame: FrameHandler;
  readonly onClosed: () => void;
  readonly onError: (err: unknown) => void;
}

interface Pending {
  readonly data: RawData;
  readonly isBinary: boolean;
  readonly bytes: number;
  readonly index: number;
  readonly readAtMs: number;
  localFrames: number;
  localBytes: number;
  sharedFrames: number;
  sharedBytes: number;
}

interface Blocked {
  readonly reason: PauseReason;
  readonly waitMs: number;
  /** Wake early when this settles (an acquire landed). */
  readonly landing?: Promise<void>;
}

/** WebSocket close codes used by the limiter (RFC 6455 §7.4.1). */
export const CLOSE_CODES = {
  /** Payload over frameBytesMax. */
  messageTooBig: 1009,
  /** The tenant's policy cannot be metered (not a token bucket), or an invalid tenant. */
  policyViolation: 1008,
  /** The queue outgrew its bound (a bug: reading should have stopped). */
  internalError: 1011,
  /** Too many active tenants or connections in this process. */
  tryAgainLater: 1013,
  /** The limiter is closing. */
  goingAway: 1001,
} as const;

export function rawByteLength(data: RawData): number {
  if (Array.isArray(data)) {
    let n = 0;
    for (const b of data) n += b.length;
    return n;
  }
  return data.byteLength;
}

export class MeteredConnection {
  private readonly queue: Pending[] = [];
  private head = 0;
  private queuedBytes = 0;
  private nextIndex = 0;
  private running = false;
  private closed = false;
  private pausedAtMs: number | undefined;
  private pauseReason: PauseReason | undefined;
  private admittedFrames = 0;
  private admittedBytes = 0;
  private pauseCount = 0;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly deps: ConnectionDeps) {
    const { ws } = deps;
    ws.on("message", (data, isBinary) => this.onMessage(data, isBinary));
    ws.once("close", () => this.finish());
    // ws reports protocol errors (e.g. a payload over its maxPayload: it has
    // already closed with 1009) as 'error' events; unhandled, they would crash the process.
    ws.on("error", (err: Error & { code?: string }) => {
      if (err.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH")
        deps.metrics.rejectedConnections.inc({ reason: "frame_too_large" });
      deps.onError(err);
    });
  }

  get id(): number {
    return this.deps.id;
  }

  get tenant(): string {
    return this.deps.tenant;
  }

  get socket(): WebSocket {
    return this.deps.ws;
  }

  stats(): ConnectionStats {
    return {
      tenant: this.deps.tenant,
      paused: this.pausedAtMs !== undefined,
      pauseReason: this.pauseReason,
      queuedFrames: this.queue.length - this.head,
      queuedBytes: this.queuedBytes,
      admittedFrames: this.admittedFrames,
      admittedBytes: this.admittedBytes,
      pauses: this.pauseCount,
    };
  }

  /** Closes the socket (code, reason) and stops metering; queued frames are discarded. */
  close(code: number, reason: string): void {
    if (
      this.deps.ws.readyState === this.deps.ws.OPEN ||
      this.deps.ws.readyState === this.deps.ws.CONNECTING
    ) {
      this.deps.ws.close(code, reason);
    }
    this.finish();
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    const bytes = rawByteLength(data);
    const { limits, metrics } = this.deps;
    if (bytes > limits.frameBytesMax) {
      metrics.rejectedConnections.inc({ reason: "frame_too_large" });
      this.close(CLOSE_CODES.messageTooBig, "frame too large");
      return;
    }
    if (
      this.queuedBytes + bytes > limits.queueBytesMax ||
      this.queue.length - this.head >= limits.queueFramesMax
    ) {
      metrics.rejectedConnections.inc({ reason: "queue_overflow" });
      this.close(CLOSE_CODES.internalError, "queue overflow");
      return;
    }
    this.queue.push({
      data,
      isBinary,
      bytes,
      index: this.nextIndex++,
      readAtMs: this.deps.clock(),
      localFrames: 0,
      localBytes: 0,
      sharedFrames: 0,
      sharedBytes: 0,
    });
    this.queuedBytes += bytes;
    if (!this.running) {
      this.running = true;
      void this.run();
    }
  }

  private async run(): Promise<void> {
    try {
      while (!this.closed && this.head < this.queue.length) {
        const p = this.queue[this.head]!;
        const blocked = this.pay(p);
        if (blocked !== undefined) {
          this.pause(blocked.reason);
          await this.sleep(blocked.waitMs, blocked.landing);
          continue;
        }
        this.shift();
        this.admittedFrames++;
        this.admittedBytes += p.bytes;
        const cls = { tenant_class: this.deps.tenantClass };
        this.deps.metrics.admittedFrames.inc(cls);
        if (p.bytes > 0) this.deps.metrics.admittedBytes.inc(cls, p.bytes);
        const info: FrameInfo = {
          connectionId: this.deps.id,
          index: p.index,
          bytes: p.bytes,
          readAtMs: p.readAtMs,
          admittedAtMs: this.deps.clock(),
        };
        let r: void | Promise<void>;
        try {
          r = this.deps.onFrame(p.data, p.isBinary, info);
        } catch (err) {
          this.deps.onError(err);
          continue;
        }
        if (r !== undefined) {
          this.pause("handler");
          await r.catch(this.deps.onError);
        }
      }
      if (!this.closed) this.resume();
    } catch (err) {
      this.deps.onError(err);
      this.close(CLOSE_CODES.internalError, "metering failed");
    } finally {
      this.running = false;
    }
  }

  /**
   * Pays what it can of the head frame; undefined when fully paid. The local
   * cap is paid first: it costs nothing global, so a connection held by its own
   * cap never sits on tenant tokens other connections could use.
   */
  private pay(p: Pending): Blocked | undefined {
    const { local, quota, limits } = this.deps;
    p.localFrames += local.frames.takeUpTo(1 - p.localFrames);
    p.localBytes += local.bytes.takeUpTo(p.bytes - p.localBytes);
    if (p.localFrames < 1 || p.localBytes < p.bytes) {
      const waitMs = Math.max(
        local.frames.msUntil(1 - p.localFrames),
        local.bytes.msUntil(p.bytes - p.localBytes),
      );
      return { reason: "connection", waitMs: clamp(waitMs, 1, limits.pollMaxMs) };
    }
    p.sharedFrames += quota.frames.takeUpTo(1 - p.sharedFrames);
    p.sharedBytes += quota.bytes.takeUpTo(p.bytes - p.sharedBytes);
    const missingFrames = 1 - p.sharedFrames;
    const missingBytes = p.bytes - p.sharedBytes;
    if (missingFrames > 0 || missingBytes > 0) {
      // A guess of the refill time at the base slice rate; re-checked at least every pollMaxMs.
      const waitMs = Math.max(
        (missingFrames * 1000) / limits.sliceFramesPerSecond,
        (missingBytes * 1000) / limits.sliceBytesPerSecond,
      );
      const landing =
        missingBytes > 0 && missingFrames > 0
          ? Promise.race([quota.bytes.nextLanding(), quota.frames.nextLanding()])
          : missingBytes > 0
            ? quota.bytes.nextLanding()
            : quota.frames.nextLanding();
      return { reason: "tenant", waitMs: clamp(waitMs, 1, limits.pollMaxMs), landing };
    }
    return undefined;
  }

  private shift(): void {
    const p = this.queue[this.head]!;
    this.queuedBytes -= p.bytes;
    // Drop the reference now (payloads can be large); compact now and then.
    (this.queue as (Pending | undefined)[])[this.head] = undefined;
    this.head++;
    if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  private pause(reason: PauseReason): void {
    if (this.pausedAtMs !== undefined) return;
    this.pausedAtMs = this.deps.clock();
    this.pauseReason = reason;
    this.pauseCount++;
    this.deps.ws.pause();
    this.deps.metrics.pausedConnections.inc();
    this.deps.metrics.pauses.inc({ reason });
  }

  private resume(): void {
    if (this.pausedAtMs === undefined) return;
    this.endPause();
    this.deps.ws.resume();
  }

  private endPause(): void {
    if (this.pausedAtMs === undefined) return;
    const seconds = (this.deps.clock() - this.pausedAtMs) / 1000;
    this.deps.metrics.pausedConnections.dec();
    this.deps.metrics.pauseDuration.observe({ reason: this.pauseReason ?? "tenant" }, Math.max(0, seconds));
    this.pausedAtMs = undefined;
    this.pauseReason = undefined;
  }

  private sleep(ms: number, landing?: Promise<void>): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      this.wakeTimer = setTimeout(resolve, ms);
      landing?.then(resolve);
    }).then(() => {
      if (this.wakeTimer !== undefined) clearTimeout(this.wakeTimer);
      this.wakeTimer = undefined;
      this.wake = undefined;
    });
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.endPause();
    if (this.wakeTimer !== undefined) clearTimeout(this.wakeTimer);
    this.wake?.();
    this.queue.length = 0;
    this.head = 0;
    this.queuedBytes = 0;
    this.deps.onClosed();
  }
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}
