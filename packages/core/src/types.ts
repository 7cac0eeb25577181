// The ground floor: the vocabulary every geoquota package shares (share
// units, algorithms, a key's policy, timing; the names are in ids.ts) and the plain data
// of the reference model. No dependencies by design; config, limiter, gossip,
// stream and the Lua differential tests import these definitions.

/** Shares are integers out of U parts per million (DESIGN §2). */
export const SHARE_UNITS = 1_000_000;
export const US_PER_SECOND = 1_000_000;

export const ALGORITHMS = ["token_bucket", "gcra", "sliding_window", "fixed_window", "sliding_log"] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

/** A global limit: burst capacity C and refill r per second (windows: C per windowMs). */
export interface LimitSpec {
  readonly algorithm: Algorithm;
  /** Burst capacity C of the global limit (window algorithms: requests per window). */
  readonly capacity: number;
  /** Global refill rate r, cost units per second (window algorithms: capacity / window). */
  readonly refillPerSecond: number;
  /** Window length for the window algorithms. */
  readonly windowMs?: number;
}

/** Everything a script needs to decide for one (tenant, resource) in this region. */
export interface KeyPolicy {
  readonly tenant: string;
  readonly resource: string;
  readonly limit: LimitSpec;
  /** This region's base share b_i, ppm. */
  readonly baseShare: number;
  /** Floor share, ppm: never lent below; the share during recovery. */
  readonly floorShare: number;
}

/** The rate algorithms follow the share; the window algorithms keep the static base slice. */
export function isRateAlgorithm(a: Algorithm): boolean {
  return a === "token_bucket" || a === "gcra";
}

export interface Timing {
  /** ε, clock margin on each side, µs. */
  readonly epsilonUs: number;
  /** D, loan duration, µs (also the longest in-process lease and loan the scripts grant). */
  readonly loanDurationUs: number;
  /**
   * Leased mode is configured in this region (in-process clients may hold
   * leases): a token bucket in recovery has share 0, not floor, until
   * born + D + ε (DESIGN §4). The scripts learn it from the `:L` suffix of the
   * bucket fingerprint (`bucketVersion`); limiter and daemon must agree.
   */
  readonly leasedMode?: boolean;
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
  /**
   * A quota assignment (RLQS, DESIGN §11; `g:e:q:b` in P:k): ppm of share whose rate (and
   * capacity C·q/U) a proxy holds until expiry; `tokens` is the burst beyond C·q/U. Never released.
   */
  readonly shareUnits?: number;
  /** A quota assignment's burst as granted (`b` of `g:e:q:b`): a supersede keeps it backed. */
  readonly burst?: number;
}

/**
 * The policy fingerprint stored with the bucket: when it changes the script
 * settles and rebuilds the share schedule (a stale schedule would apply an old
 * base share). Must be byte-identical to what the Redis store sends.
 */
export function policyVersion(limit: KeyLimit): string {
  return `${limit.algorithm}:${limit.capacity}:${limit.refillPerSecond}:${limit.windowMs ?? 0}:${limit.baseShare}:${limit.floorShare}`;
}

/** Whether the recovery lease hold applies to this key: leased mode on, and a token bucket (the only algorithm leases exist for). */
export function leaseHold(limit: KeyLimit, timing: Timing): boolean {
  return timing.leasedMode === true && limit.algorithm === "token_bucket";
}

/**
 * What `P:b`'s `pv` holds and every script receives as ARGV[8]: the policy
 * fingerprint plus `:L` when the recovery lease hold applies (the share
 * schedule differs, so a bucket built without it must be rebuilt).
 */
export function bucketVersion(limit: KeyLimit, timing: Timing): string {
  return leaseHold(limit, timing) ? `${policyVersion(limit)}:L` : policyVersion(limit);
}
