// In-process leases of one (tenant, resource) for streams: the limiter's
// leased path (DESIGN §7: batches leased from the regional bucket, counted
// against its capacity until released or expired), with three changes that
// byte-sized costs need. The limiter's `LeasedClient` is all-or-nothing per
// cost and keeps a used-up lease until it expires; for streams:
//
// 1. Partial takes: a 64 KiB frame is paid from several batches (a batch must
//    stay small: leased tokens idle in a process are withheld from others).
// 2. A lease is released as soon as it is used up. Until then the bucket counts
//    its tokens against capacity, so holding spent leases to expiry caps a
//    stream at about C_slice per lease duration whatever the refill rate.
// 3. Pacing: after a short grant (the bucket is dry) the next acquire waits
//    `pacingMs`, so a throttled stream costs ~20 Redis calls/s, not one per
//    round-trip; refill accumulates meanwhile and the next grant is larger.
//
// Timing is the limiter's (trap 6): a lease is usable until the monotonic time
// we SENT the acquire + min(asked, granted duration) − margin.
import type { KeyPolicy, RegionStore } from "@geoquota/limiter";
import { leaseWindow, type MonotonicClock } from "@geoquota/limiter/internal";

export interface LeaseBucketOptions {
  /** Tokens asked per acquire. */
  readonly batch: number;
  /** Acquire when held tokens fall to this or below. */
  readonly lowWater: number;
  /** Lease duration asked of the store, ≤ D (default 2000 ms). */
  readonly durationMs?: number;
  /** Stop using a lease this long before its computed end (default 100 ms). */
  readonly marginMs?: number;
  /** After a short grant, wait this long before the next acquire (default 50 ms). */
  readonly pacingMs?: number;
  /** After a failed acquire, wait this long (default 100 ms). */
  readonly retryBackoffMs?: number;
  readonly clock: MonotonicClock;
  readonly onError?: (err: unknown) => void;
}

interface Held {
  readonly leaseId: string;
  readonly granted: number;
  used: number;
  readonly usableUntilMs: number;
}

export class LeaseBucket {
  private readonly held: Held[] = [];
  private inflight: Promise<void> | undefined;
  private landed: { promise: Promise<void>; resolve: () => void } | undefined;
  private notBeforeMs = 0;
  private closed = false;
  private readonly durationMs: number;
  private readonly marginMs: number;
  private readonly pacingMs: number;
  private readonly retryBackoffMs: number;
  private readonly onError: (err: unknown) => void;
  private readonly releases = new Set<Promise<void>>();

  constructor(
    private readonly store: RegionStore,
    readonly policy: KeyPolicy,
    private readonly o: LeaseBucketOptions,
  ) {
    this.durationMs = o.durationMs ?? 2000;
    this.marginMs = o.marginMs ?? 100;
    this.pacingMs = o.pacingMs ?? 50;
    this.retryBackoffMs = o.retryBackoffMs ?? 100;
    this.onError = o.onError ?? (() => {});
    if (!Number.isInteger(o.batch) || o.batch < 1 || o.batch > 1_000_000)
      throw new RangeError("batch in [1, 1e6]");
    if (!(this.marginMs < this.durationMs)) throw new RangeError("marginMs must be < durationMs");
  }

  /** Whole tokens usable now. */
  available(): number {
    this.dropExpired(this.o.clock());
    let sum = 0;
    for (const l of this.held) sum += l.granted - l.used;
    return sum;
  }

  /** Takes up to `want` whole tokens (oldest lease first); returns how many. Prefetches when low. */
  takeUpTo(want: number): number {
    const now = this.o.clock();
    this.dropExpired(now);
    let need = Math.max(0, Math.floor(want));
    let taken = 0;
    while (need > 0 && this.held.length > 0) {
      const l = this.held[0]!;
      const t = Math.min(need, l.granted - l.used);
      l.used += t;
      need -= t;
      taken += t;
      if (l.used >= l.granted) {
        this.held.shift();
        this.release(l); // used up: give the capacity back now (point 2)
      }
    }
    let rest = 0;
    for (const l of this.held) rest += l.granted - l.used;
    if (rest <= this.o.lowWater) this.acquire(now);
    return taken;
  }

  /** Resolves when the next acquire lands (or after close). Never resolves early without one. */
  nextLanding(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.landed === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.landed = { promise, resolve };
    }
    return this.landed.promise;
  }

  private acquire(now: number): void {
    if (this.closed || this.inflight !== undefined || now < this.notBeforeMs) return;
    const sentAtMs = now; // before the request leaves: never from receipt (trap 6)
    const asked = this.o.batch;
    this.inflight = this.store
      .acquireLease(this.policy, asked, this.durationMs)
      .then(
        (lease) => {
          if (lease.granted < asked) this.notBeforeMs = this.o.clock() + this.pacingMs;
          if (lease.granted <= 0) return;
          const h: Held = {
            leaseId: lease.leaseId,
            granted: lease.granted,
            used: 0,
            usableUntilMs: leaseWindow(lease, sentAtMs, this.durationMs, this.marginMs, this.o.clock())
              .usableUntilMs,
          };
          if (this.closed) this.release(h);
          else this.held.push(h);
        },
        (err: unknown) => {
          this.notBeforeMs = this.o.clock() + this.retryBackoffMs;
          this.onError(err);
        },
      )
      .finally(() => {
        this.inflight = undefined;
        const l = this.landed;
        this.landed = undefined;
        l?.resolve();
      });
  }

  private dropExpired(now: number): void {
    for (let i = this.held.length - 1; i >= 0; i--) {
      const l = this.held[i]!;
      if (now >= l.usableUntilMs) {
        this.held.splice(i, 1);
        this.release(l);
      }
    }
  }

  private release(l: Held): void {
    const p = this.store
      .releaseLease(this.policy, l.leaseId, l.used)
      .catch(this.onError)
      .finally(() => this.releases.delete(p));
    this.releases.add(p);
  }

  /** Stops acquiring; reports used and returns unused tokens of every held lease. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inflight !== undefined) await this.inflight;
    for (const l of this.held.splice(0, this.held.length)) this.release(l);
    this.landed?.resolve();
    await Promise.all([...this.releases]);
  }
}
