// Response headers and body of a decision. Headers: the IETF draft's
// structured fields `RateLimit-Policy` and `RateLimit`
// (draft-ietf-httpapi-ratelimit-headers-12; RFC 9651 lists, written here
// directly: test/headers.test.ts checks them byte for byte against the
// structured-headers library's serializer),
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
import { clampSf, type DecisionNumbers, decisionNumbers, whole } from "./decision-numbers.js";
import type { CheckResult, LimitScope } from "./limiter.js";
import { type KeyPolicy, type LimitSpec, SHARE_UNITS } from "@geoquota/core";

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

/** What the `pk` parameter carries: an HMAC of the key (default), the stored key, or nothing. */
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

/** What the headers read of a decision. */
export type HeaderFields = Pick<
  CheckResult,
  | "allowed"
  | "limit"
  | "remaining"
  | "scope"
  | "scopeLimit"
  | "resetSeconds"
  | "retryAfterSeconds"
  | "degraded"
  | "source"
  | "policy"
>;

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

/** The region's base slice C·b/U: the `region` policy item's quota (stable while shares move). */
export function baseSliceOf(policy: KeyPolicy): number {
  return whole((policy.limit.capacity * policy.baseShare) / SHARE_UNITS);
}

/** Options of a call that gave none (one object, so its pk cache is kept). */
const NO_OPTIONS: HeaderOptions = {};

/**
 * The serialized `pk` parameter (`;pk=:<base64>:`, empty when omitted) per options object and
 * per policy object: one HMAC per key and options (the limiter keeps one KeyPolicy per key),
 * not one per decision. Both are read-only values; both keys are weak.
 */
const pkParams = new WeakMap<HeaderOptions, WeakMap<KeyPolicy, string>>();

function pkParam(policy: KeyPolicy, options: HeaderOptions): string {
  let byPolicy = pkParams.get(options);
  if (byPolicy === undefined) {
    byPolicy = new WeakMap();
    pkParams.set(options, byPolicy);
  }
  let param = byPolicy.get(policy);
  if (param === undefined) {
    const pk = partitionKeyOf(`${policy.tenant}|${policy.resource}`, options);
    // An sf-binary: base64 (with padding) between colons.
    param = pk === undefined ? "" : `;pk=:${pk.toString("base64")}:`;
    byPolicy.set(policy, param);
  }
  return param;
}

/**
 * The headers of a decision; `n`: its numbers, when the caller computed them for the body too.
 * Every number in the structured fields is a whole one within the sf-integer range
 * (decision-numbers.ts clamps them), and the item names are the fixed strings "global",
 * "region" and "process", so the fields are written as text: an sf-string item with integer
 * and byte-sequence parameters.
 */
export function rateLimitHeaders(
  r: HeaderFields,
  options: HeaderOptions = NO_OPTIONS,
  n: DecisionNumbers = decisionNumbers(r),
): Record<string, string> {
  const { limit, remaining, reset, retryAfter } = n;
  const w = windowSeconds(r.policy.limit);
  const pk = pkParam(r.policy, options);
  const window = w === undefined ? "" : `;w=${w}`;
  // The region's item states the base slice (the policy); a process's leases do
  // not refill (no window), its fail-open bucket refills like the slice.
  const scopeQuota = r.scope === "region" ? baseSliceOf(r.policy) : limit;
  const scopeWindow = r.scope === "region" || r.source === "fail_open" ? window : "";
  const h: Record<string, string> = {
    "ratelimit-policy": `"global";q=${n.globalLimit}${window}${pk}, "${r.scope}";q=${scopeQuota}${scopeWindow}${pk}`,
    ratelimit: `"${r.scope}";r=${remaining};t=${reset}${pk}`,
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
 * fail-open bound when one applies, and the refund receipt of an admission that has one.
 * `n`: the decision's numbers, when the caller computed them for the headers too.
 */
export function decisionBody(r: CheckResult, n: DecisionNumbers = decisionNumbers(r)): DecisionBody {
  const { limit, remaining } = n;
  return {
    allowed: r.allowed,
    limit,
    remaining,
    scope: r.scope,
    resetSeconds: r.resetSeconds,
    retryAfterSeconds: r.retryAfterSeconds,
    region: r.region,
    degraded: r.degraded,
    global: { limit: n.globalLimit },
    ...(r.scope === "region" ? { regional: { limit, remaining } } : { process: { limit, remaining } }),
    ...(r.failOpenBound !== undefined ? { failOpenBound: r.failOpenBound } : {}),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    ...(r.wouldDeny !== undefined ? { wouldDeny: r.wouldDeny } : {}),
    ...(r.refundReceipt !== undefined ? { refundReceipt: r.refundReceipt } : {}),
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
  readonly refundReceipt?: string;
}
