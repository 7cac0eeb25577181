// Envoy's `envoy.filters.http.rate_limit_quota` filter config for a geoquota region
// (DESIGN §11, issue 28 point 3): generated, and checked, so that a proxy keeps the global
// bound even when it holds no assignment. The proxy decides alone in three states the
// region never sees: a request matched by no bucket (Envoy allows it and does not report
// it), a bucket with no assignment yet (Envoy's default: allow all), and an expired
// assignment. Each must deny, because anything the proxy admits there was carved from no
// slice. Field names are those of Envoy's v3 protos (rate_limit_quota.proto in
// go-control-plane/envoy v1.40.0); that file is not in our descriptor sets (its matcher
// imports need modules the bootstrap does not fetch), so the names below are a hand-written
// list taken from it, and the check refuses any other.

/** The filter's type URL and the per-bucket settings' (the matcher's action). */
export const RLQS_FILTER_TYPE =
  "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig";
export const RLQS_BUCKET_SETTINGS_TYPE =
  "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings";
const HEADER_INPUT_TYPE = "type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput";

/** Fields of each message, as rate_limit_quota.proto names them. */
export const RLQS_FILTER_FIELDS = {
  RateLimitQuotaFilterConfig: [
    "rlqs_server",
    "domain",
    "bucket_matchers",
    "filter_enabled",
    "filter_enforced",
    "request_headers_to_add_when_not_enforced",
  ],
  RateLimitQuotaBucketSettings: [
    "bucket_id_builder",
    "reporting_interval",
    "deny_response_settings",
    "no_assignment_behavior",
    "expired_assignment_behavior",
  ],
  NoAssignmentBehavior: ["fallback_rate_limit"],
  ExpiredAssignmentBehavior: [
    "expired_assignment_behavior_timeout",
    "fallback_rate_limit",
    "reuse_last_assignment",
  ],
  DenyResponseSettings: ["http_status", "http_body", "grpc_status", "response_headers_to_add"],
} as const;

export interface RlqsFilterOptions {
  /** The Envoy cluster pointing at the region's RLS gRPC listener (HTTP/2). */
  readonly cluster: string;
  /** The RLS domain (the native domain, or an envoyproxy/ratelimit file's). */
  readonly domain: string;
  /** bucket_id key → request header it is read from (the keys the RLS lookup matches). */
  readonly headers: Readonly<Record<string, string>>;
  /** How often the proxy reports each bucket; Envoy requires more than 100 ms. */
  readonly reportingIntervalMs: number;
}

const DENY_ALL = { blanket_rule: "DENY_ALL" } as const;

/**
 * Every request goes to the bucket its headers build; a request without them is matched by
 * no bucket and falls to `on_no_match`, which denies (Envoy would allow it unreported).
 */
export function rlqsFilterConfig(o: RlqsFilterOptions): Record<string, unknown> {
  if (!(o.reportingIntervalMs > 100)) throw new Error("reportingIntervalMs must be more than 100 ms");
  const builder: Record<string, unknown> = {};
  for (const [key, header] of Object.entries(o.headers)) {
    builder[key] = {
      custom_value: { name: key, typed_config: { "@type": HEADER_INPUT_TYPE, header_name: header } },
    };
  }
  // Only a request carrying every header gets the bucket (an absent header has no value to send).
  const present = Object.values(o.headers).map((h) => ({
    single_predicate: {
      input: { name: h, typed_config: { "@type": HEADER_INPUT_TYPE, header_name: h } },
      value_match: { safe_regex: { google_re2: {}, regex: ".+" } },
    },
  }));
  if (present.length === 0) throw new Error("headers: at least one bucket_id key");
  const denyEverywhere = {
    no_assignment_behavior: { fallback_rate_limit: DENY_ALL },
    expired_assignment_behavior: { fallback_rate_limit: DENY_ALL },
    deny_response_settings: { http_status: { code: 429 } },
  };
  const bucket = {
    "@type": RLQS_BUCKET_SETTINGS_TYPE,
    bucket_id_builder: { bucket_id_builder: builder },
    reporting_interval: `${o.reportingIntervalMs / 1000}s`,
    ...denyEverywhere,
  };
  return {
    name: "envoy.filters.http.rate_limit_quota",
    typed_config: {
      "@type": RLQS_FILTER_TYPE,
      rlqs_server: { envoy_grpc: { cluster_name: o.cluster } },
      domain: o.domain,
      bucket_matchers: {
        matcher_list: {
          matchers: [
            {
              predicate: present.length === 1 ? present[0] : { and_matcher: { predicate: present } },
              on_match: { action: { name: "geoquota", typed_config: bucket } },
            },
          ],
        },
        on_no_match: {
          action: {
            name: "unmatched",
            typed_config: {
              "@type": RLQS_BUCKET_SETTINGS_TYPE,
              no_assignment_behavior: { fallback_rate_limit: DENY_ALL },
              deny_response_settings: { http_status: { code: 429 } },
            },
          },
        },
      },
    },
  };
}

/** A Duration as Envoy's YAML writes it ("0.5s") or as a message ({seconds, nanos}), in ms. */
function durationMs(v: unknown): number {
  if (typeof v === "string" && /^\d+(\.\d+)?s$/.test(v)) return Number(v.slice(0, -1)) * 1000;
  if (typeof v === "object" && v !== null) {
    const d = v as { seconds?: unknown; nanos?: unknown };
    return Number(d.seconds ?? 0) * 1000 + Number(d.nanos ?? 0) / 1e6;
  }
  return Number.NaN;
}

function fieldsOnly(
  where: string,
  v: unknown,
  allowed: readonly string[],
  out: string[],
): Record<string, unknown> {
  if (typeof v !== "object" || v === null) {
    out.push(`${where}: expected a message`);
    return {};
  }
  for (const k of Object.keys(v)) {
    if (k !== "@type" && !allowed.includes(k)) out.push(`${where}: unknown field '${k}'`);
  }
  return v as Record<string, unknown>;
}

function deniesAll(where: string, behaviour: unknown, fields: readonly string[], out: string[]): void {
  if (behaviour === undefined) {
    out.push(`${where}: not set (Envoy's default for no assignment allows all, which breaks the bound)`);
    return;
  }
  const b = fieldsOnly(where, behaviour, fields, out);
  if ("reuse_last_assignment" in b) {
    out.push(`${where}: reuse_last_assignment spends an assignment whose reservation ended at TTL + margin`);
  }
  const rule = (b.fallback_rate_limit as { blanket_rule?: unknown } | undefined)?.blanket_rule;
  if (rule !== "DENY_ALL")
    out.push(`${where}: fallback_rate_limit must be blanket_rule DENY_ALL, not ${String(rule)}`);
}

function checkBucket(where: string, action: unknown, out: string[]): void {
  const a = (action as { typed_config?: unknown } | undefined)?.typed_config;
  const s = fieldsOnly(where, a, RLQS_FILTER_FIELDS.RateLimitQuotaBucketSettings, out);
  if (s["@type"] !== RLQS_BUCKET_SETTINGS_TYPE)
    out.push(`${where}: action is not RateLimitQuotaBucketSettings`);
  deniesAll(
    `${where}.no_assignment_behavior`,
    s.no_assignment_behavior,
    RLQS_FILTER_FIELDS.NoAssignmentBehavior,
    out,
  );
  // A bucket without an id builder is never reported, so it never has an assignment to expire.
  if (s.bucket_id_builder !== undefined) {
    deniesAll(
      `${where}.expired_assignment_behavior`,
      s.expired_assignment_behavior,
      RLQS_FILTER_FIELDS.ExpiredAssignmentBehavior,
      out,
    );
    if (!(durationMs(s.reporting_interval) > 100))
      out.push(`${where}.reporting_interval: must be more than 100 ms`);
  }
  if (s.deny_response_settings !== undefined)
    fieldsOnly(
      `${where}.deny_response_settings`,
      s.deny_response_settings,
      RLQS_FILTER_FIELDS.DenyResponseSettings,
      out,
    );
}

/**
 * What in a filter entry (`{name, typed_config}`) would let a proxy admit outside the bound;
 * empty: none. Every bucket — each matcher's action and `on_no_match`, which must exist —
 * denies with no assignment and on expiry.
 */
export function checkRlqsFilterConfig(filter: unknown): string[] {
  const out: string[] = [];
  const f = filter as { name?: unknown; typed_config?: unknown } | null;
  if (f?.name !== "envoy.filters.http.rate_limit_quota")
    out.push("name: not envoy.filters.http.rate_limit_quota");
  const c = fieldsOnly("typed_config", f?.typed_config, RLQS_FILTER_FIELDS.RateLimitQuotaFilterConfig, out);
  if (c["@type"] !== RLQS_FILTER_TYPE) out.push("typed_config: @type is not RateLimitQuotaFilterConfig");
  if (typeof c.domain !== "string" || c.domain === "") out.push("domain: missing");
  if (c.rlqs_server === undefined) out.push("rlqs_server: missing");
  const m = c.bucket_matchers as
    | {
        matcher_list?: { matchers?: { on_match?: { action?: unknown } }[] };
        on_no_match?: { action?: unknown };
      }
    | undefined;
  (m?.matcher_list?.matchers ?? []).forEach((e, i) => {
    checkBucket(`bucket_matchers.matchers[${i}]`, e.on_match?.action, out);
  });
  if (m?.on_no_match === undefined)
    out.push("bucket_matchers.on_no_match: missing (Envoy allows an unmatched request and never reports it)");
  else checkBucket("bucket_matchers.on_no_match", m.on_no_match.action, out);
  return out;
}
