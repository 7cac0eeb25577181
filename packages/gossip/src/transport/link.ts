// One authenticated connection to a peer: data frames, heartbeat, RTT.
import type { RawData, WebSocket } from "ws";
import { HEARTBEAT_MISSES_MAX } from "./config.js";
import { type PeerDownReason, localReason } from "./errors.js";
import { type CloseTracker, toBytes } from "./socket.js";

export interface LinkEvents {
  frame(bytes: Uint8Array): void;
  rtt(ms: number): void;
  closed(reason: PeerDownReason): void;
}

const PING_BYTES = 8;

export class Link {
  readonly upAtMs: number;
  private lastSeenMs: number;
  private lastTickMs: number;
  private pingSeq = 0n;
  private pingSentMs = 0;
  private closedFired = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly tracker: CloseTracker,
    private readonly heartbeatMs: number,
    private readonly now: () => number,
    private readonly events: LinkEvents,
  ) {
    this.upAtMs = now();
    this.lastSeenMs = this.upAtMs;
    this.lastTickMs = this.upAtMs;
    ws.on("message", this.onMessage);
    ws.on("pong", this.onPong);
    ws.on("ping", this.onPing);
    ws.on("error", this.onError);
    ws.on("close", this.onClose);
  }

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  get open(): boolean {
    return this.ws.readyState === this.ws.OPEN && !this.tracker.decided;
  }

  /** The caller has checked size and backpressure. */
  send(bytes: Uint8Array): void {
    this.ws.send(bytes, { binary: true });
  }

  /**
   * Called every heartbeatMs: terminate if silent too long, else ping.
   * Silence counts only time this process was running: a tick that comes late
   * (a stalled event loop on a loaded machine) found the peer's pongs still
   * unread in the socket (timers run before I/O), so the lateness is credited
   * instead of blamed on the peer. A dead peer is still caught: every tick,
   * late or not, adds at least one period of silence.
   */
  tick(): void {
    const now = this.now();
    const lateMs = now - this.lastTickMs - this.heartbeatMs;
    this.lastTickMs = now;
    if (lateMs > 0) this.lastSeenMs = Math.min(now, this.lastSeenMs + lateMs);
    if (!this.open) return;
    const silentMs = now - this.lastSeenMs;
    if (silentMs >= HEARTBEAT_MISSES_MAX * this.heartbeatMs) {
      this.tracker.terminate(localReason("GQ_ERR_HEARTBEAT", `silent for ${Math.round(silentMs)} ms`));
      return;
    }
    this.pingSeq += 1n;
    this.pingSentMs = this.now();
    const payload = Buffer.alloc(PING_BYTES);
    payload.writeBigUInt64BE(this.pingSeq);
    this.ws.ping(payload);
  }

  close(reason: PeerDownReason): void {
    this.tracker.close(reason);
  }

  private readonly onMessage = (data: RawData, isBinary: boolean): void => {
    this.lastSeenMs = this.now();
    if (this.tracker.decided) return; // closing: nothing more is delivered
    if (!isBinary) {
      this.tracker.close(localReason("GQ_ERR_PROTOCOL", "text frame"));
      return;
    }
    this.events.frame(toBytes(data));
  };

  private readonly onPing = (): void => {
    this.lastSeenMs = this.now();
  };

  private readonly onPong = (data: Buffer): void => {
    this.lastSeenMs = this.now();
    // Only the latest ping measures RTT; an older pong still proves liveness.
    if (data.byteLength === PING_BYTES && data.readBigUInt64BE() === this.pingSeq) {
      this.events.rtt(this.now() - this.pingSentMs);
    }
  };

  private readonly onError = (err: Error): void => {
    this.tracker.onError(err);
  };

  private readonly onClose = (code: number, reason: Buffer): void => {
    if (this.closedFired) return;
    this.closedFired = true;
    this.events.closed(this.tracker.result(code, reason));
  };
}
