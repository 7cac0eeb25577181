// The transport's error catalog: every way a link can be refused or lost has
// one stable `GQ_ERR_*` code and the WebSocket close code it travels as.
// README-transport.md documents each entry; a test keeps the two in sync.
//
// 4000–4999 are the application range of RFC 6455 §7.4.2: we send these.
// The 1xxx entries are produced by `ws` or the network (RFC 6455 codes); they
// are listed so that every PeerDownReason maps to a documented code.

export interface TransportErrorInfo {
  readonly closeCode: number;
  /** Short label used in metrics (bounded cardinality). */
  readonly reason: string;
  readonly description: string;
}

export const TRANSPORT_ERRORS = {
  GQ_ERR_PROTOCOL: {
    closeCode: 4000,
    reason: "protocol",
    description: "malformed or unexpected handshake message, text frame, or data frame before authentication",
  },
  GQ_ERR_AUTH: {
    closeCode: 4001,
    reason: "auth",
    description: "HMAC challenge-response failed: the peers do not share the secret",
  },
  GQ_ERR_VERSION: {
    closeCode: 4002,
    reason: "version",
    description: "protocol versions differ",
  },
  GQ_ERR_UNKNOWN_PEER: {
    closeCode: 4003,
    reason: "unknown_peer",
    description: "peer id not configured, or the dialed region is not the one the dialer expected",
  },
  GQ_ERR_ROLE: {
    closeCode: 4004,
    reason: "role",
    description: "the region with the larger id dialed; only the smaller id dials",
  },
  GQ_ERR_HANDSHAKE_TIMEOUT: {
    closeCode: 4005,
    reason: "handshake_timeout",
    description: "handshake not completed within handshakeTimeoutMs",
  },
  GQ_ERR_REPLACED: {
    closeCode: 4006,
    reason: "replaced",
    description: "a newer authenticated connection from the same peer replaced this one",
  },
  GQ_ERR_HEARTBEAT: {
    closeCode: 4007,
    reason: "heartbeat",
    description: "nothing received for 3 heartbeats; the socket is terminated (the peer sees 1006)",
  },
  GQ_ERR_SHUTDOWN: {
    closeCode: 4008,
    reason: "shutdown",
    description: "the region is stopping",
  },
  GQ_ERR_OVERLOADED: {
    closeCode: 4009,
    reason: "overloaded",
    description: "too many connections still in their handshake (pendingHandshakesMax)",
  },
  GQ_ERR_FRAME_TOO_LARGE: {
    closeCode: 1009,
    reason: "frame_too_large",
    description: "a frame exceeded frameBytesMax (sent by ws, RFC 6455 'message too big')",
  },
  GQ_ERR_WS_FRAMING: {
    closeCode: 1002,
    reason: "ws_framing",
    description: "invalid WebSocket framing detected by ws (1002; 1007 for invalid UTF-8 maps here too)",
  },
  GQ_ERR_TLS: {
    closeCode: 1015,
    reason: "tls",
    description:
      "TLS handshake failed, e.g. a certificate not signed by the configured CA (never sent on the wire)",
  },
  GQ_ERR_CONNECTION_LOST: {
    closeCode: 1006,
    reason: "connection_lost",
    description: "the connection dropped without a close frame (never sent on the wire)",
  },
  GQ_ERR_PEER_CLOSED: {
    closeCode: 1000,
    reason: "peer_closed",
    description:
      "the peer closed with a code outside this catalog (the original code is kept in PeerDownReason)",
  },
} as const satisfies Record<string, TransportErrorInfo>;

export type TransportErrorCode = keyof typeof TRANSPORT_ERRORS;

const byCloseCode = new Map<number, TransportErrorCode>();
for (const [code, info] of Object.entries(TRANSPORT_ERRORS)) {
  byCloseCode.set(info.closeCode, code as TransportErrorCode);
}
// RFC 6455 codes that ws emits for framing problems other than 1002.
byCloseCode.set(1007, "GQ_ERR_WS_FRAMING");

/** Maps a close code received from the wire to the catalog. */
export function errorCodeForClose(closeCode: number): TransportErrorCode {
  return byCloseCode.get(closeCode) ?? "GQ_ERR_PEER_CLOSED";
}

/** Why a link went down or a handshake failed. */
export interface PeerDownReason {
  readonly code: TransportErrorCode;
  /** The close code sent (by: "local") or received (by: "remote"). */
  readonly closeCode: number;
  /** Which side decided to close. */
  readonly by: "local" | "remote";
  /** Human-readable detail; never contains secrets. */
  readonly detail: string;
}

export function localReason(code: TransportErrorCode, detail: string): PeerDownReason {
  return { code, closeCode: TRANSPORT_ERRORS[code].closeCode, by: "local", detail };
}

export function remoteReason(closeCode: number, detail: string): PeerDownReason {
  return { code: errorCodeForClose(closeCode), closeCode, by: "remote", detail };
}

/** Close reasons are limited to 123 bytes by RFC 6455; keep ours short and ASCII. */
export function closeReasonText(reason: PeerDownReason): string {
  return `${reason.code}: ${reason.detail}`.replace(/[^\x20-\x7e]/g, "?").slice(0, 120);
}
