// Plain data shared by the model's modules. Structurally compatible with
// @geoquota/limiter's types (this package has no dependencies by design).

/** Shares are integers out of U parts per million (DESIGN §2). */
export const SHARE_UNITS = 1_000_000;
export const US_PER_SECOND = 1_000_000;

export type Algorithm = "token_bucket" | "gcra" | "sliding_window" | "fixed_window" | "sliding_log";

/** The rate algorithms follow the share; the window algorithms keep the static base slice. */
export function isRateAlgorithm(a: Algorithm): boolean {
  return a === "token_bucket" || a === "gcra";
}

export interface Timing {
  /** ε, clock margin on each side, µs. */
  readonly epsilonUs: number;
  /** D, loan duration, µs. */
  readonly loanDurationUs: number;
}

/** One key's policy in this region: the global limit plus this region's base and floor. */
export interface KeyLimit {
  readonly algorithm: Algorithm;
  /** Global burst capacity C (windows: admissions per window). */
  readonly capacity: number;
  /** Global refill r per second (ignored by the window algorithms). */
  readonly refillPerSecond: number;
  /** Window length, window algorithms only. */
  readonly windowMs?: number;
  /** Base share b_i, ppm. */
  readonly baseShare: number;
  /** Floor, ppm: the region never lends below it; its share in recovery. */
  readonly floorShare: number;
}

/** A loan as the lender wrote it: `units:deadlineUs:seq` in Redis. */
export interface LoanEntry {
  readonly units: number;
  readonly deadlineUs: number;
  readonly seq: number;
}

/** An in-process lease: tokens handed to a client, reserved until expiry. */
export interface LeaseHold {
  readonly tokens: number;
  readonly expiryUs: number;
}

/**
 * The policy fingerprint stored with the bucket: when it changes the script
 * settles and rebuilds the share schedule (a stale schedule would apply an old
 * base share). Must be byte-identical to what the Redis store sends.
 */
export function policyVersion(limit: KeyLimit): string {
  return `${limit.algorithm}:${limit.capacity}:${limit.refillPerSecond}:${limit.windowMs ?? 0}:${limit.baseShare}:${limit.floorShare}`;
}
