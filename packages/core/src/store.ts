// The store interface: what a region's decision engine answers (one
// round-trip to the region's Redis per call) and the shapes it answers in.
// The limiter runs on it; @geoquota/redis implements it. Defined here, in the
// ground floor, so neither of the two depends on the other for it, and so
// the limiter engine never meets a Redis error type: the store throws
// `StoreMisuseError` for a call that can never succeed (bad arguments or
// names, a broken install), which the limiter's breaker does not count.

import type { KeyPolicy } from "./types.js";

export interface Decision {
  readonly allowed: boolean;
  /** The global capacity C the tenant is entitled to. */
  readonly limit: number;
  /** Cost this region could still admit right now (≥ 0). */
  readonly remaining: number;
  /** Seconds until this region's slice is full again. */
  readonly resetSeconds: number;
  /** Seconds until `cost` could be admitted (0 when allowed). */
  readonly retryAfterSeconds: number;
  /** The share this region used for the decision, ppm. */
  readonly share: number;
  /** Redis TIME the script used, µs (lets tests replay decisions through the model). */
  readonly nowUs: number;
  /** True while the region is in recovery after state loss (DESIGN §4). */
  readonly recovering: boolean;
}

export interface CompoundDecision {
  readonly allowed: boolean;
  /** One decision per limit, in request order; on denial, the first failing index. */
  readonly parts: readonly Decision[];
  readonly failedIndex: number;
}

export interface Lease {
  readonly leaseId: string;
  readonly granted: number;
  /** Redis TIME at which the bucket stops reserving the lease, µs. */
  readonly expiryUs: number;
  readonly nowUs: number;
}

export interface LoanRecord {
  readonly lender: string;
  readonly borrower: string;
  readonly units: number;
  readonly deadlineUs: number;
  readonly seq: number;
}

/** A region's view of one key (GET /v1/quotas/:tenant/:resource). */
export interface QuotaView {
  readonly tenant: string;
  readonly resource: string;
  readonly nowUs: number;
  readonly share: number;
  readonly recovering: boolean;
  readonly tokens: number;
  /** CRDT counters by replica id (`<region>.<incarnation>`). */
  readonly counters: {
    readonly admitted: Readonly<Record<string, number>>;
    readonly refunded: Readonly<Record<string, number>>;
    readonly denied: Readonly<Record<string, number>>;
  };
  /** Loans this region granted (still reserved) and received (in use or not). */
  readonly loansOut: readonly LoanRecord[];
  readonly loansIn: readonly LoanRecord[];
}

/** The admission a refund reverses, from its verified receipt (src/receipts.ts). */
export interface RefundReceiptRef {
  /** Unique per admission; the store refunds each id at most once. */
  readonly id: string;
  /** Redis TIME of the admission, µs: refused if before the current incarnation was born. */
  readonly admittedUs: number;
  /** Refused once Redis TIME reaches this, µs; the used id is remembered until then. */
  readonly expiresUs: number;
}

/** Why the store refused a refund: receipt already used, past its window, or state lost since. */
export type RefundRefusal = "used" | "expired" | "lost";

export type RefundOutcome<D extends Decision = Decision> =
  | { readonly refunded: true; readonly decision: D }
  | { readonly refunded: false; readonly reason: RefundRefusal; readonly nowUs: number };

/**
 * A key's state restarted empty in one region (docs/design.md §3.4): what it could admit there
 * just before and just after (0 unless in-process leases are outstanding), in Redis TIME.
 */
export interface ResetOutcome {
  readonly before: number;
  readonly after: number;
  readonly share: number;
  readonly nowUs: number;
}

/**
 * A quota assignment asked of the region (RLQS, docs/design.md §11): a token bucket of `burst`
 * and `rate` (tokens/s) the proxy enforces for `ttlUs` from its receipt, reserved from the send
 * until ttl + `marginUs` (the delivery margin). `id` is unique per assignment. The store reserves
 * the largest assignment that fits (rate first, then burst), never more than asked.
 * `supersedes`: the id of the live assignment of the same stream and bucket this one renews (the
 * proxy runs one bucket at a time, so their rates do not add while both are live); an unknown or
 * expired id is ignored.
 */
export interface AssignmentAsk {
  readonly id: string;
  readonly burst: number;
  readonly rate: number;
  readonly ttlUs: number;
  readonly marginUs: number;
  readonly supersedes?: string;
}

/** What was reserved (cut to what the slice backs); ttlUs 0: nothing. */
export interface AssignmentGrant {
  readonly burst: number;
  readonly rate: number;
  /** The TTL to send. */
  readonly ttlUs: number;
  /** Redis TIME at which the reservation ends (send + ttl + margin). */
  readonly expiryUs: number;
  readonly nowUs: number;
  /** The region's share of the key (ppm) before the reservation: its bucket's plus assignments'. */
  readonly shareUnits: number;
}

/** One limit of a compound check (RegionStore.checkCompound). */
export interface CompoundCheckItem {
  readonly policy: KeyPolicy;
  readonly cost: number;
  readonly need?: number;
}

/** The region's decision engine. One round-trip to the region's Redis per call. */
export interface RegionStore {
  readonly region: string;
  check(policy: KeyPolicy, cost: number): Promise<Decision>;
  /**
   * Several limits admitted all-or-nothing, atomically. An item passes when its limit still
   * holds `need` (default: its cost) and is charged its cost: a check-only item (the RLS's
   * hits_addend 0) has cost 0 and need 1 — it denies the whole check when not one unit is
   * left, and counts nothing.
   */
  checkCompound(items: readonly CompoundCheckItem[]): Promise<CompoundDecision>;
  /** Gives `cost` back for the admission `receipt` names, at most once (DESIGN §7). */
  refund(policy: KeyPolicy, cost: number, receipt: RefundReceiptRef): Promise<RefundOutcome>;
  acquireLease(policy: KeyPolicy, tokens: number, durationMs: number): Promise<Lease>;
  /** Reports `used` of the lease's tokens as consumed and returns the rest. */
  releaseLease(policy: KeyPolicy, leaseId: string, used: number): Promise<void>;
  inspect(policy: KeyPolicy): Promise<QuotaView>;
  /**
   * Restarts the key's state in this region empty, never full: an admission by nobody of what
   * it holds (the global bound holds; refunds of earlier admissions give nothing back). Optional.
   */
  reset?(policy: KeyPolicy): Promise<ResetOutcome>;
  /** Reserves a quota assignment from this region's slice (token bucket only). Optional. */
  reserveAssignment?(policy: KeyPolicy, ask: AssignmentAsk): Promise<AssignmentGrant>;
  /**
   * Counts a proxy's usage report (what its assignment's bucket allowed and denied) as
   * admissions and denials of the key, taking nothing from the bucket. Optional.
   */
  countUsage?(policy: KeyPolicy, allowed: number, denied: number): Promise<void>;
  /** Optional liveness probe (one cheap round-trip); readiness falls back to `inspect`. */
  ping?(): Promise<void>;
  /**
   * Tells the region's gossip daemon that demand crossed the region's slice (a key started being
   * denied), so its next round comes early (DESIGN §3 "Demand, targets and lending"). Fire and
   * forget: a lost wake only leaves the timer's round. Optional.
   */
  wake?(): void;
  close(): Promise<void>;
}

/**
 * A store call that can never succeed as made (an argument out of range, a
 * bad name, a script whose header or reply disagrees with its binding, an
 * unsafe Redis setup): not an outage, so the circuit breaker does not count
 * it. `code` is the store's own catalog code (e.g. `GQ_ERR_BAD_NAME`).
 */
export class StoreMisuseError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "StoreMisuseError";
    this.code = code;
  }
}
