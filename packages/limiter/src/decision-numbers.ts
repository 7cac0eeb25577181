// The numbers a decision reports, computed in one place (issue 27 point 5): the
// HTTP headers and the JSON body (headers.ts) both read them, so `limit`,
// `remaining` and the resets cannot disagree between the two. Pure: a
// CheckResult's fractional, possibly infinite numbers in, whole numbers a
// structured-field Integer can carry out.
import type { CheckResult } from "./limiter.js";

/** A structured-field Integer has at most 15 digits (RFC 9651 §3.3.1). */
export const SF_INTEGER_MAX = 999_999_999_999_999;

/** `n` within what a structured-field Integer holds (non-finite: the largest). */
export const clampSf = (n: number): number =>
  Number.isFinite(n) ? Math.min(n, SF_INTEGER_MAX) : SF_INTEGER_MAX;

/** Whole tokens, as every header and body field reports them (clamped to what a header can carry). */
export const whole = (x: number): number => clampSf(Math.max(0, Math.floor(x)));

/** `Retry-After` in whole seconds ≥ 1: a client told "0" would retry at once. */
export function retryAfterHeader(retryAfterSeconds: number): number {
  return clampSf(Math.max(1, Math.ceil(retryAfterSeconds)));
}

/** What the numbers are computed from. */
export type DecisionNumbersInput = Pick<
  CheckResult,
  "allowed" | "limit" | "remaining" | "scopeLimit" | "resetSeconds" | "retryAfterSeconds"
>;

export interface DecisionNumbers {
  /** Capacity of the decision's scope, whole tokens (body `limit`, header limit fields). */
  readonly limit: number;
  /** What the scope could still admit, whole tokens (body `remaining`, `r`, remaining fields). */
  readonly remaining: number;
  /** The global capacity C, whole tokens (body `global.limit`, the `global` policy item). */
  readonly globalLimit: number;
  /** Retry-After, whole seconds ≥ 1 (sent on denials only). */
  readonly retryAfter: number;
  /**
   * Every reset field (`t`, the legacy resets): allowed, the reset rounded up; denied, the
   * Retry-After value (the draft: Retry-After should not point before the end of the
   * effective window, and `Reset: 0` beside `Retry-After: 60` contradicts it).
   */
  readonly reset: number;
}

export function decisionNumbers(r: DecisionNumbersInput): DecisionNumbers {
  const retryAfter = retryAfterHeader(r.retryAfterSeconds);
  return {
    limit: whole(r.scopeLimit),
    remaining: whole(r.remaining),
    globalLimit: whole(r.limit),
    retryAfter,
    reset: r.allowed ? clampSf(Math.max(0, Math.ceil(r.resetSeconds))) : retryAfter,
  };
}
