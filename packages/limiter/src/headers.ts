// Response headers and body of a decision. Headers: the IETF draft's
// structured fields `RateLimit-Policy` and `RateLimit`
// (draft-ietf-httpapi-ratelimit-headers-11, serialized with structured-headers),
// the legacy `RateLimit-Limit/Remaining/Reset` and `X-RateLimit-*` sets,
// Retry-After on denials and X-RateLimit-Degraded. `limit` and `remaining`
// always describe the same scope (the region's slice, or this process's own
// tokens), named by the policy item and by `scope` in the body.
import { type Item, serializeList } from "structured-headers";
import type { CheckResult, DecisionSource, LimitScope } from "./limiter.js";
import type { KeyPolicy, LimitSpec } from "./types.js";

export interface HeaderFields {
  readonly allowed: boolean;
  /** The global capacity C. */
  readonly limit: number;
  readonly remaining: number;
  readonly scope: LimitScope;
  readonly scopeLimit: number;
  readonly resetSeconds: number;
  readonly retryAfterSeconds: number;
  readonly degraded: boolean;
  readonly source: DecisionSource;
  readonly policy: KeyPolicy;
}

/** A structured-field Integer has at most 15 digits (RFC 9651 §3.3.1). */
export const SF_INTEGER_MAX = 999_999_999_999_999;
const clampSf = (n: number) => (Number.isFinite(n) ? Math.min(n, SF_INTEGER_MAX) : SF_INTEGER_MAX);
/** Whole tokens, as every header and body field reports them (clamped to what a header can carry). */
const whole = (x: number) => clampSf(Math.max(0, Math.floor(x)));

/**
 * The policy's window in whole seconds (≥ 1): the window of the window
 * algorithms, else C/r (the time a drained bucket takes to refill; a
 * region's slice C·s/U at r·s/U has the same). Undefined without refill.
 */
export function windowSeconds(limit: LimitSpec): number | undefined {
  if (limit.windowMs !== undefined) return clampSf(Math.max(1, Math.ceil(limit.windowMs / 1000)));
  if (!(limit.refillPerSecond > 0)) return undefined;
  return clampSf(Math.max(1, Math.ceil(limit.capacity / limit.refillPerSecond)));
}

/** `Retry-After` in whole seconds ≥ 1: a client told "0" would retry at once. */
export function retryAfterHeader(retryAfterSeconds: number): number {
  return clampSf(Math.max(1, Math.ceil(retryAfterSeconds)));
}

export function rateLimitHeaders(r: HeaderFields): Record<string, string> {
  const limit = whole(r.scopeLimit);
  const remaining = whole(r.remaining);
  const reset = clampSf(Math.max(0, Math.ceil(r.resetSeconds)));
  const w = windowSeconds(r.policy.limit);
  // The partition key: the key as stored (hashed when it had other characters).
  const pk = Buffer.from(`${r.policy.tenant}|${r.policy.resource}`);
  const quota = (q: number, windowed: boolean): Map<string, number | Buffer> => {
    const params = new Map<string, number | Buffer>([["q", q]]);
    if (windowed && w !== undefined) params.set("w", w);
    return params.set("pk", pk);
  };
  // A process's leases do not refill (no window); its fail-open bucket refills like the slice.
  const policies: Item[] = [
    ["global", quota(whole(r.limit), true)],
    [r.scope, quota(limit, r.scope === "region" || r.source === "fail_open")],
  ];
  // On a denial, t is the Retry-After value: the draft says Retry-After should not
  // point before the end of the effective window.
  const retryAfter = retryAfterHeader(r.retryAfterSeconds);
  const t = r.allowed ? reset : retryAfter;
  const service: Item = [
    r.scope,
    new Map<string, number | Buffer>([
      ["r", remaining],
      ["t", t],
      ["pk", pk],
    ]),
  ];
  const h: Record<string, string> = {
    "ratelimit-policy": serializeList(policies),
    ratelimit: serializeList([service]),
    "ratelimit-limit": String(limit),
    "ratelimit-remaining": String(remaining),
    "ratelimit-reset": String(reset),
    "x-ratelimit-limit": String(limit),
    "x-ratelimit-remaining": String(remaining),
    "x-ratelimit-reset": String(reset),
    "x-ratelimit-scope": r.scope,
  };
  if (!r.allowed) h["retry-after"] = String(retryAfter);
  if (r.degraded) h["x-ratelimit-degraded"] = "true";
  return h;
}

/**
 * The JSON body of a single decision (DESIGN §8): `limit` and `remaining` in
 * whole tokens of `scope`; `global.limit` is C; `regional` (region scope) or
 * `process` (process scope) repeats the pair under its scope's name; plus the
 * fail-open bound when one applies.
 */
export function decisionBody(r: CheckResult): DecisionBody {
  const limit = whole(r.scopeLimit);
  const remaining = whole(r.remaining);
  return {
    allowed: r.allowed,
    limit,
    remaining,
    scope: r.scope,
    resetSeconds: r.resetSeconds,
    retryAfterSeconds: r.retryAfterSeconds,
    region: r.region,
    degraded: r.degraded,
    global: { limit: whole(r.limit) },
    ...(r.scope === "region" ? { regional: { limit, remaining } } : { process: { limit, remaining } }),
    ...(r.failOpenBound !== undefined ? { failOpenBound: r.failOpenBound } : {}),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    ...(r.wouldDeny !== undefined ? { wouldDeny: r.wouldDeny } : {}),
  };
}

export interface DecisionBody {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly scope: LimitScope;
  readonly resetSeconds: number;
  readonly retryAfterSeconds: number;
  readonly region: string;
  readonly degraded: boolean;
  readonly global: { readonly limit: number };
  readonly regional?: { readonly limit: number; readonly remaining: number };
  readonly process?: { readonly limit: number; readonly remaining: number };
  readonly failOpenBound?: CheckResult["failOpenBound"];
  readonly reason?: CheckResult["reason"];
  readonly wouldDeny?: boolean;
}
