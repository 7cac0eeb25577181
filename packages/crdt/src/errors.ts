// The package's one error catalog. Expected failures (bad input, malformed
// frames) are values, never throws. Codes are stable: they are matched by the
// daemon's metrics and documented in README.md (a test keeps the two in step).
// closeCode is the WebSocket close code a daemon uses when a frame fails this way.

export const ERRORS = {
  GQ_ERR_INVALID_AMOUNT: { closeCode: 1007, summary: "amount is negative, NaN or infinite" },
  GQ_ERR_INVALID_ID: {
    closeCode: 1007,
    summary: "replica or region id does not match ^[A-Za-z0-9_.-]{1,128}$",
  },
  GQ_ERR_INVALID_KEY: {
    closeCode: 1007,
    summary: "key is not `tenant|resource` with valid parts, or longer than 260 characters",
  },
  GQ_ERR_INVALID_LOAN: {
    closeCode: 1007,
    summary: "loan units not an integer in [0, 1000000], or deadlineUs/seq not a non-negative safe integer",
  },
  GQ_ERR_STALE_SEQ: { closeCode: 1007, summary: "a lender's new loan seq is not above its current one" },
  GQ_ERR_UNKNOWN_PEER: { closeCode: 1008, summary: "peer is not configured on this replica" },
  GQ_ERR_FRAME_TOO_LARGE: { closeCode: 1009, summary: "frame exceeds frameBytesMax" },
  GQ_ERR_FRAME_MALFORMED: { closeCode: 1007, summary: "bytes are not a single valid msgpack value" },
  GQ_ERR_UNSUPPORTED_VERSION: {
    closeCode: 1002,
    summary: "frame protocol version is not one this decoder knows",
  },
  GQ_ERR_UNKNOWN_KIND: { closeCode: 1002, summary: "frame kind code is unknown" },
  GQ_ERR_INVALID_SHAPE: { closeCode: 1007, summary: "frame or field has the wrong type or arity" },
  GQ_ERR_INVALID_NUMBER: {
    closeCode: 1007,
    summary: "a number in a frame is not finite and non-negative (or not an integer where one is required)",
  },
  GQ_ERR_INVALID_CLOCK: {
    closeCode: 1007,
    summary: "a clock frame's txUs is 0, its holdUs exceeds an hour, or it has a hold without an echo",
  },
  GQ_ERR_TOO_MANY_ENTRIES: { closeCode: 1009, summary: "an entry count exceeds its decode limit" },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export interface CrdtError {
  readonly code: ErrorCode;
  readonly message: string;
}

export type Result<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: CrdtError };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function err<T = never>(code: ErrorCode, message: string): Result<T> {
  return { ok: false, error: { code, message } };
}

/** The WebSocket close code for an error (1002 protocol, 1007 invalid data, 1008 policy, 1009 too big). */
export function closeCodeOf(code: ErrorCode): number {
  return ERRORS[code].closeCode;
}
