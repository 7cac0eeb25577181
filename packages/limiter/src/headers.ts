// Response headers and body of a decision. Headers: the IETF draft's
// structured fields `RateLimit-Policy` and `RateLimit`
// (draft-ietf-httpapi-ratelimit-headers-12, serialized with structured-headers),
// the legacy `RateLimit-Limit/Remaining/Reset` and `X-RateLimit-*` sets,
// Retry-After on denials and X-RateLimit-Degraded. `limit` and `remaining`
// always describe the same scope (the region's slice, or this process's own
// tokens), named by the policy item and by `scope` in the body.
//
// The draft asks a policy to stay stable while the service limit moves: the
// `region` policy item's quota is the region's *base* slice C·b/U (changes
// only with the policy), while the current slice (which moves with loans and
// re-weighting) shows in `RateLimit` (`r`, `t`) and in the legacy limit
// headers. The partition key `pk` is, by default, an HMAC of the key (not the
// raw tenant id, which end clients must not learn); `partitionKey: "raw"`
// restores the stored key, `"omit"` drops the parameter.
import { createHash, createHmac } from "node:crypto";
import { type Item, serializeList } from "structured-headers";
import type { CheckResult, DecisionSource, LimitScope } from "./limiter.js";
import { type KeyPolicy, type LimitSpec, SHARE_UNITS } from "@geoquota/core";

/** What the `pk` parameter carries: an HMAC of the key (default), the stored key, or nothing. */
/** The header fields every decision carries (what rateLimitHeaders sets), for the route docs. */
export const DECISION_HEADER_NAMES: readonly string[] = [
  "RateLimit-Policy",
  "RateLimit",
  "RateLimit-Limit",
  "RateLimit-Remaining",
  "RateLimit-Reset",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "X-RateLimit-Scope",
];

export type PartitionKeyMode = "hash" | "raw" | "omit";
export const PARTITION_KEY_MODES: readonly PartitionKeyMode[] = ["hash", "raw", "omit"];

export interface HeaderOptions {
  readonly partitionKey?: PartitionKeyMode;
  /**
   * The HMAC key of `partitionKey: "hash"` (the same in every region, so a
   * client sees one pk per key); without one, a plain SHA-256 (hides the id
   * from a casual reader only: a guessable id can be tried).
   */
  readonly partitionKeySecret?: string;
}

/** Bytes of the hashed pk: 16 (128 bits), plenty to tell a client's partitions apart. */
const PK_HASH_BYTES = 16;

/** The `pk` bytes for a stored key `tenant|resource`, or undefined when omitted. */
export function partitionKeyOf(key: string, options: HeaderOptions = {}): Buffer | undefined {
  const mode = options.partitionKey ?? "hash";
  if (mode === "omit") return undefined;
  if (mode === "raw") return Buffer.from(key);
  const h =
    options.partitionKeySecret !== undefined
      ? createHmac("sha256", options.partitionKeySecret)
      : createHash("sha256");
  return h.update(key).digest().subarray(0, PK_HASH_BYTES);
}

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

/** The region's base slice C·b/U: the `region` policy item's quota (stable while shares move). */
export function baseSliceOf(policy: KeyPolicy): number {
  return whole((policy.limit.capacity * policy.baseShare) / SHARE_UNITS);
}

export function rateLimitHeaders(r: HeaderFields, options: HeaderOptions = {}): Record<string, string> {
  const limit = whole(r.scopeLimit);
  const remaining = whole(r.remaining);
  // On a denial, t and every legacy reset are the Retry-After value: the draft
  // says Retry-After should not point before the end of the effective window,
  // and a `Reset: 0` beside `Retry-After: 60` contradicts it.
  const retryAfter = retryAfterHeader(r.retryAfterSeconds);
  const reset = r.allowed ? clampSf(Math.max(0, Math.ceil(r.resetSeconds))) : retryAfter;
  const w = windowSeconds(r.policy.limit);
  const pk = partitionKeyOf(`${r.policy.tenant}|${r.policy.resource}`, options);
  const withPk = (params: Map<string, number | Buffer>) => (pk === undefined ? params : params.set("pk", pk));
  const quota = (q: number, windowed: boolean): Map<string, number | Buffer> => {
    const params = new Map<string, number | Buffer>([["q", q]]);
    if (windowed && w !== undefined) params.set("w", w);
    return withPk(params);
  };
  // The region's item states the base slice (the policy); a process's leases do
  // not refill (no window), its fail-open bucket refills like the slice.
  const scopeQuota = r.scope === "region" ? baseSliceOf(r.policy) : limit;
  const policies: Item[] = [
    ["global", quota(whole(r.limit), true)],
    [r.scope, quota(scopeQuota, r.scope === "region" || r.source === "fail_open")],
  ];
  const service: Item = [
    r.scope,
    withPk(
      new Map<string, number | Buffer>([
        ["r", remaining],
        ["t", reset],
      ]),
    ),
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
