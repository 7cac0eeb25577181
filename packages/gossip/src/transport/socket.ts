// Small helpers around a ws socket shared by the handshake and the link.
import type { RawData, WebSocket } from "ws";
import { type PeerDownReason, closeReasonText, localReason, remoteReason } from "./errors.js";

/** ws hands binary messages over as Buffer, ArrayBuffer or fragments depending on binaryType. */
export function toBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

/** Classifies an 'error' event of a ws socket (framing errors carry WS_ERR_* codes). */
export function reasonForSocketError(err: Error): PeerDownReason {
  const code = (err as { code?: unknown }).code;
  if (code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") return localReason("GQ_ERR_FRAME_TOO_LARGE", err.message);
  if (typeof code === "string" && code.startsWith("WS_ERR_"))
    return localReason("GQ_ERR_WS_FRAMING", err.message);
  if (isTlsError(err)) return localReason("GQ_ERR_TLS", err.message);
  return localReason("GQ_ERR_CONNECTION_LOST", err.message);
}

/**
 * Tracks why a socket closed: the first local decision (our close, a ws
 * framing error) wins over what the 'close' event reports, because after
 * terminate() or a ws-initiated close the event only says 1006 or echoes.
 */
export class CloseTracker {
  private local: PeerDownReason | null = null;

  constructor(private readonly ws: WebSocket) {}

  get decided(): boolean {
    return this.local !== null;
  }

  /** Sends a close frame with the reason's code; ws destroys the socket after closeTimeout. */
  close(reason: PeerDownReason): void {
    this.local ??= reason;
    if (this.ws.readyState === this.ws.CONNECTING) this.ws.terminate();
    else if (this.ws.readyState === this.ws.OPEN) this.ws.close(reason.closeCode, closeReasonText(reason));
  }

  /** Drops the TCP connection without a close handshake (the peer is not listening anyway). */
  terminate(reason: PeerDownReason): void {
    this.local ??= reason;
    this.ws.terminate();
  }

  onError(err: Error): void {
    this.local ??= reasonForSocketError(err);
  }

  /** The final reason once 'close' fired with (code, reason). */
  result(code: number, reason: Buffer): PeerDownReason {
    return this.local ?? remoteReason(code, reason.toString("utf8").slice(0, 120) || `closed with ${code}`);
  }
}

/** Node's TLS and certificate verification errors (ERR_TLS_*, ERR_SSL_*, *CERT*, UNABLE_TO_*). */
export function isTlsError(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" && /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_)|CERT/.test(code);
}
