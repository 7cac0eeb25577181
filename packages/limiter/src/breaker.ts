// Circuit breaker around the region's store: closed → (threshold consecutive
// failures) → open → (openMs elapsed) → half-open, letting a bounded number of
// probes through → closed after enough successes, open again on any failure.
import type { MonotonicClock } from "./clock.js";

export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerOptions {
  readonly failureThreshold: number;
  readonly openMs: number;
  readonly halfOpenProbes: number;
  readonly closeAfterSuccesses: number;
}

/** What `tryAcquire` grants; pass it back to `onResult`. */
export const PERMIT_DENIED = 0;
export const PERMIT_NORMAL = 1;
export const PERMIT_PROBE = 2;
export type Permit = typeof PERMIT_DENIED | typeof PERMIT_NORMAL | typeof PERMIT_PROBE;

export class CircuitBreaker {
  private stateValue: BreakerState = "closed";
  private failures = 0;
  private successes = 0;
  private probesInFlight = 0;
  private openedAtMs = 0;
  private readonly listeners: ((s: BreakerState) => void)[] = [];

  constructor(
    private readonly options: BreakerOptions,
    private readonly clock: MonotonicClock,
  ) {}

  get state(): BreakerState {
    // Report half-open as soon as it is due, even before a call asks.
    if (this.stateValue === "open" && this.clock() - this.openedAtMs >= this.options.openMs)
      return "half_open";
    return this.stateValue;
  }

  /** Milliseconds until an open breaker lets a probe through (0 if not open). */
  msUntilProbe(): number {
    if (this.stateValue !== "open") return 0;
    return Math.max(0, this.openedAtMs + this.options.openMs - this.clock());
  }

  /** Calls `listener` on every transition; returns the function that stops it. */
  onStateChange(listener: (s: BreakerState) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  tryAcquire(): Permit {
    if (this.stateValue === "closed") return PERMIT_NORMAL;
    if (this.stateValue === "open") {
      if (this.clock() - this.openedAtMs < this.options.openMs) return PERMIT_DENIED;
      this.transition("half_open");
    }
    if (this.probesInFlight >= this.options.halfOpenProbes) return PERMIT_DENIED;
    this.probesInFlight++;
    return PERMIT_PROBE;
  }

  onResult(permit: Permit, ok: boolean): void {
    if (permit === PERMIT_DENIED) return;
    if (permit === PERMIT_PROBE) {
      this.probesInFlight = Math.max(0, this.probesInFlight - 1);
      // A probe that completes after the breaker moved on says nothing new.
      if (this.stateValue !== "half_open") return;
      if (!ok) {
        this.open();
        return;
      }
      if (++this.successes >= this.options.closeAfterSuccesses) this.transition("closed");
      return;
    }
    // A normal call finishing while open/half-open (it started while closed) must not
    // close the breaker, but its failure does not reopen a probing breaker either.
    if (this.stateValue !== "closed") return;
    if (ok) {
      this.failures = 0;
      return;
    }
    if (++this.failures >= this.options.failureThreshold) this.open();
  }

  private open(): void {
    this.openedAtMs = this.clock();
    this.transition("open");
  }

  private transition(next: BreakerState): void {
    this.failures = 0;
    this.successes = 0;
    if (next !== "half_open") this.probesInFlight = 0;
    if (next === this.stateValue) return;
    this.stateValue = next;
    for (const l of this.listeners) l(next);
  }
}
