// RFC 9457 problem details for the limiter's errors and denials, sent when the
// client asks for them (`Accept: application/problem+json`); the JSON bodies
// of errors.ts/headers.ts stay the default, so existing clients see no change.
// A denial uses the problem type the IETF ratelimit-headers draft defines
// (`quota-exceeded`, with the `violated-policies` member naming the
// RateLimit-Policy items that ran out); every other error is `about:blank`
// with the catalog's `code` (and `field`) as extension members.
import { errorBody, type LimiterError, reasonPhrase } from "./errors.js";

export const PROBLEM_JSON = "application/problem+json";
/** draft-ietf-httpapi-ratelimit-headers, "Quota Exceeded" problem type. */
export const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
export const QUOTA_EXCEEDED_TITLE = "Request cannot be satisfied as assigned quota has been exceeded";

/** The q-value an Accept header gives exactly this media type (no wildcards), if it names it. */
function quality(accept: string, type: string): number | undefined {
  let best: number | undefined;
  for (const part of accept.split(",")) {
    const [range, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    if (range !== type) continue;
    const q = params.find((p) => p.startsWith("q="));
    const value = q === undefined ? 1 : Number(q.slice(2));
    const v = Number.isFinite(value) ? value : 0;
    best = best === undefined ? v : Math.max(best, v);
  }
  return best;
}

/**
 * Whether the request asked for problem details: it names
 * application/problem+json with q > 0, at least as high as application/json.
 * Wildcards (`*\/*`) keep the default JSON body.
 */
export function prefersProblem(accept: string | readonly string[] | undefined): boolean {
  const header = Array.isArray(accept) ? accept.join(",") : (accept as string | undefined);
  if (header === undefined || header === "") return false;
  const problem = quality(header, PROBLEM_JSON);
  if (problem === undefined || problem <= 0) return false;
  return problem >= (quality(header, "application/json") ?? 0);
}

/** An error of the catalog as problem details (type about:blank: the status says it all). */
export function problemOf(err: LimiterError, extra: object = {}): Record<string, unknown> {
  const { statusCode: _s, error: _e, message, ...members } = errorBody(err);
  return {
    type: "about:blank",
    title: reasonPhrase(err.statusCode),
    status: err.statusCode,
    detail: message,
    ...members,
    ...extra,
  };
}

/** A denial as the draft's quota-exceeded problem; `decision` (the JSON body's fields) rides along. */
export function quotaExceeded(
  violatedPolicies: readonly string[],
  detail: string,
  decision: object,
  status = 429,
): Record<string, unknown> {
  return {
    ...decision,
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status,
    detail,
    "violated-policies": [...violatedPolicies],
    code: "GQ_ERR_RATE_LIMITED",
  };
}
