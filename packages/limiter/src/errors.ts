// The limiter's error catalog: stable codes (documented in README.md, checked
// by test/errors.test.ts). Expected outcomes (allowed/denied) are values, not
// errors; these are for bad input, auth (refund receipts included), and an
// unavailable store.

export const ERRORS = {
  GQ_ERR_INVALID_BODY: { statusCode: 400, message: "request body is invalid" },
  GQ_ERR_INVALID_KEY: {
    statusCode: 400,
    message: "tenant or resource has characters outside [A-Za-z0-9_.-] where they cannot be hashed",
  },
  GQ_ERR_KEY_TOO_LONG: {
    statusCode: 400,
    message: "tenant or resource is longer than the configured maximum",
  },
  GQ_ERR_INVALID_POLICY: { statusCode: 400, message: "policy is invalid" },
  GQ_ERR_REFUND_EXCEEDS_RECEIPT: { statusCode: 400, message: "refund cost is more than the receipt's cost" },
  GQ_ERR_UNAUTHORIZED: { statusCode: 401, message: "missing or wrong bearer token" },
  GQ_ERR_AUTH_INVALID: {
    statusCode: 401,
    message: "GET /v1/auth: the tenant, resource or cost is missing or invalid",
  },
  GQ_ERR_RECEIPT_INVALID: {
    statusCode: 403,
    message: "receipt: not a refund receipt this service issued (forged, altered or malformed)",
  },
  GQ_ERR_RECEIPT_WRONG_REGION: { statusCode: 403, message: "receipt: issued by another region" },
  GQ_ERR_RECEIPT_WRONG_KEY: { statusCode: 403, message: "receipt: issued for another tenant/resource" },
  GQ_ERR_DENY_LISTED: { statusCode: 403, message: "the key is on the policies' deny list" },
  GQ_ERR_NOT_FOUND: { statusCode: 404, message: "no such route" },
  GQ_ERR_POLICY_ENTRY_NOT_FOUND: {
    statusCode: 404,
    message: "the newest policies document has no entry for that tenant/resource",
  },
  GQ_ERR_METHOD_NOT_ALLOWED: { statusCode: 405, message: "the route exists, not with this method" },
  GQ_ERR_RECEIPT_USED: { statusCode: 409, message: "receipt: already refunded" },
  GQ_ERR_RECEIPT_EXPIRED: {
    statusCode: 410,
    message: "receipt: past its refund window, or the region lost its state since the admission",
  },
  GQ_ERR_POLICY_STALE: {
    statusCode: 412,
    message: "the policies document was based on a version that is no longer the newest",
  },
  GQ_ERR_PAYLOAD_TOO_LARGE: { statusCode: 413, message: "request body too large" },
  GQ_ERR_UNSUPPORTED_MEDIA_TYPE: {
    statusCode: 415,
    message: "request body has a content type the route does not take (application/json)",
  },
  GQ_ERR_RATE_LIMITED: { statusCode: 429, message: "rate limit exceeded" },
  GQ_ERR_INTERNAL: { statusCode: 500, message: "internal error" },
  GQ_ERR_RESET_UNSUPPORTED: { statusCode: 501, message: "this limiter's store cannot reset a key" },
  GQ_ERR_STORE_UNAVAILABLE: { statusCode: 503, message: "the region's store did not answer" },
  GQ_ERR_STORE_TIMEOUT: { statusCode: 503, message: "the region's store did not answer within the timeout" },
  GQ_ERR_BREAKER_OPEN: { statusCode: 503, message: "the circuit breaker around the store is open" },
  GQ_ERR_POLICY_UNKNOWN: {
    statusCode: 503,
    message: "this limiter does not know the current policy (none received yet, or its last read is too old)",
  },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export class LimiterError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  /** The offending field of the request (`cost`, `limits[1].tenant`), if any. */
  readonly field?: string;
  constructor(code: ErrorCode, message?: string, options: { field?: string; cause?: unknown } = {}) {
    super(
      message ?? ERRORS[code].message,
      options.cause !== undefined ? { cause: options.cause } : undefined,
    );
    this.name = "LimiterError";
    this.code = code;
    this.statusCode = ERRORS[code].statusCode;
    if (options.field !== undefined) this.field = options.field;
  }
}

/** Store failures the breaker counts and the degraded path handles. */
export function isStoreUnavailable(err: unknown): err is LimiterError {
  return (
    err instanceof LimiterError &&
    (err.code === "GQ_ERR_STORE_UNAVAILABLE" ||
      err.code === "GQ_ERR_STORE_TIMEOUT" ||
      err.code === "GQ_ERR_BREAKER_OPEN")
  );
}

const REASONS: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  410: "Gone",
  412: "Precondition Failed",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** The reason phrase of a status code (RFC 9110), as the `error` and problem `title` fields carry it. */
export function reasonPhrase(statusCode: number): string {
  return REASONS[statusCode] ?? "Error";
}

/** The JSON error body (Fastify's shape plus `field`). */
export function errorBody(err: LimiterError): Record<string, unknown> {
  return {
    statusCode: err.statusCode,
    code: err.code,
    error: reasonPhrase(err.statusCode),
    message: err.message,
    ...(err.field !== undefined ? { field: err.field } : {}),
  };
}
