// Wraps the region's store with a per-call timeout and the circuit breaker, so
// a slow or dead Redis costs at most `timeoutMs` per call, and nothing at all
// while the breaker is open. Failures surface as LimiterError codes the
// degraded path recognises (isStoreUnavailable).
import { PERMIT_DENIED, type CircuitBreaker } from "./breaker.js";
import { LimiterError } from "./errors.js";
import type { LeaseRenewingStore } from "./leased-client.js";
import type {
  AssignmentAsk,
  AssignmentGrant,
  CompoundCheckItem,
  CompoundDecision,
  Decision,
  KeyPolicy,
  Lease,
  QuotaView,
  RefundOutcome,
  RefundReceiptRef,
  RegionStore,
  ResetOutcome,
} from "@geoquota/core";

export type StoreErrorKind = "timeout" | "error" | "breaker_open";

export interface GuardedStoreOptions {
  readonly timeoutMs: number;
  readonly onError?: (op: string, kind: StoreErrorKind, err?: unknown) => void;
  /** A call answered after one or more failed: the store is back (however briefly). */
  readonly onRecovered?: () => void;
  /**
   * Errors that mean misuse rather than an unhealthy store (a bad argument the
   * store refused): rethrown unchanged and not counted by the breaker, so a bug
   * in one request cannot open the breaker for everyone.
   */
  readonly isMisuse?: (err: unknown) => boolean;
}

const TIMED_OUT = Symbol("timed out");

/**
 * Resolves to `p`'s value, or TIMED_OUT after `ms`. The late settlement of `p` is swallowed.
 *
 * The verdict "timed out" waits for the I/O phase of the event-loop turn in which the timer
 * fired (a setImmediate runs after it): timers run before I/O in a turn, so after a stall of
 * this process (a busy event loop, a GC pause, the host descheduling it) longer than `ms`, a
 * reply that arrived in time and sits unread in the socket would otherwise lose to its own
 * timer. Such false timeouts opened the breaker under CPU load (bench sections 2 and 8: 16
 * calls "timed out" together, then a second of fail-closed denials with Redis healthy). The
 * wait stays bounded: `ms` plus one turn.
 */
function raceTimeout<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return new Promise<T | typeof TIMED_OUT>((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(resolve, TIMED_OUT), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

export class GuardedStore implements RegionStore {
  readonly region: string;

  /**
   * Present only when the inner store can release and acquire in one call, so
   * that leased clients behind the guard keep their one round-trip per batch.
   */
  readonly renewLease?: LeaseRenewingStore["renewLease"];

  /** The last call that settled failed (a later success calls onRecovered). */
  private failing = false;

  constructor(
    readonly inner: RegionStore,
    readonly breaker: CircuitBreaker,
    private readonly options: GuardedStoreOptions,
  ) {
    this.region = inner.region;
    const renewing = inner as RegionStore & Partial<LeaseRenewingStore>;
    const renew = renewing.renewLease;
    if (typeof renew === "function") {
      this.renewLease = (policy, releases, tokens, durationMs) =>
        this.run("renewLease", () => renew.call(renewing, policy, releases, tokens, durationMs));
    }
  }

  private async run<T>(op: string, call: () => Promise<T>): Promise<T> {
    const permit = this.breaker.tryAcquire();
    if (permit === PERMIT_DENIED) {
      this.options.onError?.(op, "breaker_open");
      throw new LimiterError("GQ_ERR_BREAKER_OPEN");
    }
    let result: T | typeof TIMED_OUT;
    try {
      result = await raceTimeout(call(), this.options.timeoutMs);
    } catch (err) {
      if (this.options.isMisuse?.(err)) {
        this.breaker.onResult(permit, true);
        throw err;
      }
      this.breaker.onResult(permit, false);
      this.failing = true;
      this.options.onError?.(op, "error", err);
      throw new LimiterError("GQ_ERR_STORE_UNAVAILABLE", `store ${op} failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (result === TIMED_OUT) {
      // The call may still complete in Redis. That is safe: a check that admits
      // after we answered "unavailable" only under-admits, and a lease granted
      // unseen stays reserved until its expiry, which is conservative.
      this.breaker.onResult(permit, false);
      this.failing = true;
      this.options.onError?.(op, "timeout");
      throw new LimiterError("GQ_ERR_STORE_TIMEOUT");
    }
    this.breaker.onResult(permit, true);
    if (this.failing) {
      this.failing = false;
      this.options.onRecovered?.();
    }
    return result;
  }

  check(policy: KeyPolicy, cost: number): Promise<Decision> {
    return this.run("check", () => this.inner.check(policy, cost));
  }
  checkCompound(items: readonly CompoundCheckItem[]): Promise<CompoundDecision> {
    return this.run("checkCompound", () => this.inner.checkCompound(items));
  }
  refund(policy: KeyPolicy, cost: number, receipt: RefundReceiptRef): Promise<RefundOutcome> {
    return this.run("refund", () => this.inner.refund(policy, cost, receipt));
  }
  acquireLease(policy: KeyPolicy, tokens: number, durationMs: number): Promise<Lease> {
    return this.run("acquireLease", () => this.inner.acquireLease(policy, tokens, durationMs));
  }
  releaseLease(policy: KeyPolicy, leaseId: string, used: number): Promise<void> {
    return this.run("releaseLease", () => this.inner.releaseLease(policy, leaseId, used));
  }
  inspect(policy: KeyPolicy): Promise<QuotaView> {
    return this.run("inspect", () => this.inner.inspect(policy));
  }
  /** GQ_ERR_RESET_UNSUPPORTED when the store has no reset (docs/design.md §3.4). */
  reset(policy: KeyPolicy): Promise<ResetOutcome> {
    const inner = this.inner;
    if (inner.reset === undefined) return Promise.reject(new LimiterError("GQ_ERR_RESET_UNSUPPORTED"));
    return this.run("reset", () =>
      (inner.reset as (p: KeyPolicy) => Promise<ResetOutcome>).call(inner, policy),
    );
  }
  /** RLQS (docs/design.md §11); a store without assignments is a wiring bug, not an outage. */
  reserveAssignment(policy: KeyPolicy, ask: AssignmentAsk): Promise<AssignmentGrant> {
    const inner = this.inner;
    const reserve = inner.reserveAssignment;
    if (reserve === undefined) return Promise.reject(new Error("this store has no quota assignments"));
    return this.run("reserveAssignment", () => reserve.call(inner, policy, ask));
  }
  countUsage(policy: KeyPolicy, allowed: number, denied: number): Promise<void> {
    const inner = this.inner;
    const count = inner.countUsage;
    if (count === undefined) return Promise.reject(new Error("this store has no quota assignments"));
    return this.run("countUsage", () => count.call(inner, policy, allowed, denied));
  }
  /** Outside the breaker: a wake is fire and forget and never fails a check. */
  wake(): void {
    this.inner.wake?.();
  }
  /** Readiness: one call bounded by the timeout, outside the breaker (it must not be blocked by it). */
  async probe(probe: KeyPolicy, ping?: () => Promise<unknown>): Promise<boolean> {
    const p =
      ping !== undefined
        ? ping()
        : this.inner.ping !== undefined
          ? this.inner.ping()
          : this.inner.inspect(probe).then(() => undefined);
    try {
      return (await raceTimeout(p, Math.max(this.options.timeoutMs, 250))) !== TIMED_OUT;
    } catch {
      return false;
    }
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
