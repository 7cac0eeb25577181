// In-process leased client (seed §5.2, DESIGN §7): leases batches of tokens from
// the regional bucket and serves decisions from memory. Prefetches in the
// background under a low-water mark; returns unused tokens on close.
//
// Timing (DESIGN trap 6): a lease is usable until the client's own monotonic
// time when it SENT the acquire request + duration − margin. The send precedes
// the grant, so the client stops before the bucket stops reserving the lease.
import { type MonotonicClock, monotonicNow } from "./clock.js";
import type { KeyPolicy, RegionStore } from "./types.js";

export interface LeasedClientOptions {
  /** Tokens asked for per lease (default 50). */
  readonly batch?: number;
  /** Prefetch when available tokens fall to this or below (default 10). */
  readonly lowWater?: number;
  /** Lease duration asked of the store (default 2000 ms). */
  readonly durationMs?: number;
  /** Stop this long before the computed end (default 100 ms). */
  readonly marginMs?: number;
  /** After a grant of 0 tokens or a failed acquire, wait this long before asking again (default 100 ms). */
  readonly retryBackoffMs?: number;
  readonly clock?: MonotonicClock;
  /** Called with background failures (acquire/release); never thrown. */
  readonly onError?: (err: unknown) => void;
}

interface HeldLease {
  readonly leaseId: string;
  readonly granted: number;
  used: number;
  /** Local monotonic ms after which this lease is never used. */
  readonly usableUntilMs: number;
}

export class LeasedClient {
  private readonly leases: HeldLease[] = [];
  private inflight: Promise<void> | undefined;
  private closed = false;
  private nextAcquireAtMs = 0;
  private readonly batch: number;
  private readonly lowWater: number;
  private readonly durationMs: number;
  private readonly marginMs: number;
  private readonly retryBackoffMs: number;
  private readonly clock: MonotonicClock;
  private readonly onError: (err: unknown) => void;

  constructor(
    private readonly store: RegionStore,
    readonly policy: KeyPolicy,
    options: LeasedClientOptions = {},
  ) {
    this.batch = options.batch ?? 50;
    this.lowWater = options.lowWater ?? 10;
    this.durationMs = options.durationMs ?? 2000;
    this.marginMs = options.marginMs ?? 100;
    this.retryBackoffMs = options.retryBackoffMs ?? 100;
    this.clock = options.clock ?? monotonicNow;
    this.onError = options.onError ?? (() => {});
    if (!(this.marginMs < this.durationMs)) throw new RangeError("marginMs must be < durationMs");
  }

  /** Tokens usable right now (expired leases excluded). */
  available(): number {
    this.dropExpired(this.clock());
    let sum = 0;
    for (const l of this.leases) sum += l.granted - l.used;
    return sum;
  }

  /**
   * Takes `cost` from held leases if they cover it; never waits. Starts a
   * background prefetch when the rest falls to the low-water mark. The hot
   * path allocates nothing.
   */
  tryTake(cost: number): boolean {
    const now = this.clock();
    this.dropExpired(now);
    let total = 0;
    for (const l of this.leases) total += l.granted - l.used;
    let ok = false;
    if (total >= cost) {
      // Oldest leases first (they expire first); a cost may span leases.
      let need = cost;
      for (let i = 0; i < this.leases.length && need > 0; i++) {
        const l = this.leases[i]!;
        const take = Math.min(need, l.granted - l.used);
        l.used += take;
        need -= take;
      }
      total -= cost;
      ok = true;
    }
    if (total <= this.lowWater) this.prefetch(now);
    return ok;
  }

  /** `tryTake`, and if the held leases do not cover `cost`, one acquire (awaited) and a retry. */
  async take(cost: number): Promise<boolean> {
    if (this.tryTake(cost)) return true;
    if (this.inflight !== undefined) await this.inflight;
    else {
      this.prefetch(this.clock(), true);
      if (this.inflight !== undefined) await this.inflight;
    }
    return this.tryTake(cost);
  }

  /** Waits for a background acquire, if any (tests, warm-up). */
  async settled(): Promise<void> {
    if (this.inflight !== undefined) await this.inflight;
  }

  private prefetch(now: number, force = false): void {
    if (this.closed || this.inflight !== undefined) return;
    if (!force && now < this.nextAcquireAtMs) return;
    // Timed from here, before the request leaves: never from receipt.
    const sentAtMs = now;
    this.inflight = this.store
      .acquireLease(this.policy, this.batch, this.durationMs)
      .then(
        (lease) => {
          if (lease.granted <= 0) {
            this.nextAcquireAtMs = this.clock() + this.retryBackoffMs;
            return;
          }
          // The store may grant less time than asked; never use more than it reserves.
          const grantedMs = Math.min(this.durationMs, (lease.expiryUs - lease.nowUs) / 1000);
          const held: HeldLease = {
            leaseId: lease.leaseId,
            granted: lease.granted,
            used: 0,
            usableUntilMs: sentAtMs + grantedMs - this.marginMs,
          };
          if (this.closed) {
            this.release(held);
            return;
          }
          this.leases.push(held);
        },
        (err: unknown) => {
          this.nextAcquireAtMs = this.clock() + this.retryBackoffMs;
          this.onError(err);
        },
      )
      .finally(() => {
        this.inflight = undefined;
      });
  }

  private dropExpired(now: number): void {
    while (this.leases.length > 0 && now >= this.leases[0]!.usableUntilMs) {
      const l = this.leases.shift()!;
      // Report usage; the store ignores the return part if it has expired there too.
      this.release(l);
    }
    // Leases are pushed in send order, but a shorter grant may expire earlier.
    for (let i = this.leases.length - 1; i >= 0; i--) {
      const l = this.leases[i]!;
      if (now >= l.usableUntilMs) {
        this.leases.splice(i, 1);
        this.release(l);
      }
    }
  }

  private release(l: HeldLease): Promise<void> {
    return this.store.releaseLease(this.policy, l.leaseId, l.used).catch(this.onError);
  }

  /** Stops serving, reports used and returns unused tokens of every held lease. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inflight !== undefined) await this.inflight;
    const held = this.leases.splice(0, this.leases.length);
    await Promise.all(held.map((l) => this.release(l)));
  }
}
