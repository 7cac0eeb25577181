// Response headers for a decision: the IETF draft's RateLimit-* triple, the
// conventional X-RateLimit-* set, Retry-After on 429 and X-RateLimit-Degraded.
import type { CheckResult } from "./limiter.js";

export interface HeaderFields {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly resetSeconds: number;
  readonly retryAfterSeconds: number;
  readonly degraded: boolean;
}

export function rateLimitHeaders(r: HeaderFields): Record<string, string> {
  const limit = String(Math.floor(r.limit));
  const remaining = String(Math.max(0, Math.floor(r.remaining)));
  const reset = String(Math.max(0, Math.ceil(r.resetSeconds)));
  const h: Record<string, string> = {
    "ratelimit-limit": limit,
    "ratelimit-remaining": remaining,
    "ratelimit-reset": reset,
    "x-ratelimit-limit": limit,
    "x-ratelimit-remaining": remaining,
    "x-ratelimit-reset": reset,
  };
  // Retry-After is whole seconds ≥ 1: a client told "0" would retry at once.
  if (!r.allowed) h["retry-after"] = String(Math.max(1, Math.ceil(r.retryAfterSeconds)));
  if (r.degraded) h["x-ratelimit-degraded"] = "true";
  return h;
}

/** The JSON body of a single decision (DESIGN §8), plus the fail-open bound when one applies. */
export function decisionBody(r: CheckResult): Record<string, unknown> {
  return {
    allowed: r.allowed,
    limit: r.limit,
    remaining: r.remaining,
    resetSeconds: r.resetSeconds,
    retryAfterSeconds: r.retryAfterSeconds,
    region: r.region,
    degraded: r.degraded,
    ...(r.failOpenBound !== undefined ? { failOpenBound: r.failOpenBound } : {}),
  };
}
