// In-process leased client (seed §5.2, DESIGN §7): leases batches of tokens from
// the regional bucket and serves decisions from memory. Prefetches in the
// background under a low-water mark; returns unused tokens on close.
//
// Timing (DESIGN trap 6): a lease is usable until the client's own monotonic
// time when it SENT the acquire request + duration − margin. The send precedes
// the grant, so the client stops before the bucket stops reserving the lease.
//
// Round-trips: with a store that can renew (the Redis store), a used-up lease
// is reported inside the next acquire (one EVALSHA for both), and a used-up
// lease that reaches its end before another acquire is simply forgotten (the
// bucket counts an expired lease as used, which it is). Only a lease that ends
// with tokens left is released on its own, so they go back to the bucket.
//
// The stream package's per-(tenant, resource) leases use this client too, with
// the options byte-sized costs need: partial takes (`takeUpTo`: a 64 KiB frame
// is paid from several small batches), `releaseWhenSpent` (a used-up lease is
// released at once: held to expiry, its tokens stay counted against the
// bucket's capacity and cap a stream near C_slice per lease duration whatever
// the refill rate), and `pacingMs` (after a short grant the next acquire waits,
// so a throttled stream costs ~20 Redis calls/s, not one per round-trip).
import { type MonotonicClock, monotonicNow } from "./clock.js";
import type { KeyPolicy, Lease, RegionStore } from "@geoquota/core";

/**
 * How long a granted lease may be spent (trap 6, DESIGN §7), for every
 * in-process lessee (this client, also as the stream package's leases): from the
 * instant the acquire was SENT (never its receipt: the store's clock started
 * before the reply arrived), for the shorter of the asked and the granted
 * duration (the script caps it at D and before a borrowed loan's
 * deadline − ε), minus the safety margin. `goneAtStoreMs`: when the store
 * stops reserving it, on this process's clock.
 */
export function leaseWindow(
  lease: Lease,
  sentAtMs: number,
  askedMs: number,
  marginMs: number,
  nowMs: number,
): { usableUntilMs: number; goneAtStoreMs: number } {
  const grantedMs = Math.min(askedMs, (lease.expiryUs - lease.nowUs) / 1000);
  return { usableUntilMs: sentAtMs + grantedMs - marginMs, goneAtStoreMs: nowMs + grantedMs };
}

/**
 * The most tokens one leased client holds at once: a fixed batch prefetches one batch at the
 * low-water mark (batch + lowWater); a rate-sized one (the region config's default) may hold
 * an ending lease's rest beside a new batch, each at most maxBatch, its mark at most half a
 * batch (2·maxBatch + lowWater). The client enforces it: an acquire asks for at most the
 * room left under it, and none when there is none.
 */
export function leasedHeldBound(l: {
  batch: number;
  lowWater: number;
  maxBatch?: number | undefined;
}): number {
  const max = l.maxBatch ?? l.batch;
  return max > l.batch ? 2 * max + l.lowWater : l.batch + l.lowWater;
}

/** A store that releases finished leases and acquires the next in one call (RedisRegionStore). */
export interface LeaseRenewingStore {
  renewLease(
    policy: KeyPolicy,
    releases: readonly { readonly leaseId: string; readonly used: number }[],
    tokens: number,
    durationMs: number,
  ): Promise<{ lease: Lease; returned: readonly number[] }>;
}

function canRenew(s: RegionStore): s is RegionStore & LeaseRenewingStore {
  return typeof (s as Partial<LeaseRenewingStore>).renewLease === "function";
}

/** At most this many finished leases ride along with one acquire (the store's bound too). */
const MAX_CARRIED_RELEASES = 64;

export interface LeasedClientOptions {
  /** Tokens asked for per lease (default 50); with `maxBatch` above it, the smallest batch asked. */
  readonly batch?: number;
  /** Prefetch when available tokens fall to this or below (default 10); with sizing, the smallest mark. */
  readonly lowWater?: number;
  /**
   * Batch sized from the observed rate (issue 24 point 4): each acquire asks for the tokens
   * the key takes in `sizeForMs` at the rate seen since the previous acquire, at least `batch`
   * and at most this (default `batch`: no sizing); a key that ran dry since its last acquire
   * asks for at least twice its last batch. With sizing on, the low-water mark also
   * grows to the tokens taken during two acquire round-trips (at most half a batch), and a
   * key in use asks for its next lease one round-trip before its newest lease ends, so a
   * key under steady demand never runs dry.
   */
  readonly maxBatch?: number;
  /** With sizing: a lease holds about this long's worth of tokens (default durationMs / 2). */
  readonly sizeForMs?: number;
  /** Lease duration asked of the store (default 2000 ms). */
  readonly durationMs?: number;
  /** Stop this long before the computed end (default 100 ms). */
  readonly marginMs?: number;
  /** After a grant of 0 tokens or a failed acquire, wait this long before asking again (default 100 ms). */
  readonly retryBackoffMs?: number;
  /**
   * Release a lease as soon as it is used up (one `releaseLease` call of its
   * own; acquires never carry releases then), instead of keeping it until it
   * expires (default false).
   */
  readonly releaseWhenSpent?: boolean;
  /**
   * After a grant smaller than `batch` (0 included), wait this long before the
   * next acquire (default: no pacing; only a grant of 0 waits `retryBackoffMs`).
   */
  readonly pacingMs?: number;
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
  /**
   * Local monotonic ms by which the store has certainly expired the lease
   * (receipt + granted duration: the grant's TIME precedes the receipt), so a
   * release could return nothing.
   */
  readonly goneAtStoreMs: number;
}

export class LeasedClient {
  private readonly leases: HeldLease[] = [];
  /** Used-up leases not yet reported (renewing stores only): they ride with the next acquire. */
  private readonly finished: HeldLease[] = [];
  private readonly renewer: (RegionStore & LeaseRenewingStore) | undefined;
  private inflight: Promise<void> | undefined;
  /** Resolved when the acquire in flight lands (nextLanding). */
  private landed: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Releases not yet answered: close() waits for them. */
  private readonly releasing = new Set<Promise<void>>();
  private closed = false;
  private nextAcquireAtMs = 0;
  private readonly batch: number;
  private readonly lowWater: number;
  private readonly durationMs: number;
  private readonly marginMs: number;
  private readonly retryBackoffMs: number;
  private readonly releaseWhenSpent: boolean;
  private readonly pacingMs: number | undefined;
  private readonly clock: MonotonicClock;
  private readonly onError: (err: unknown) => void;
  private readonly maxBatch: number;
  /** leasedHeldBound of these options: the held leases never exceed it (prefetch). */
  private readonly heldBound: number;
  private readonly sizeForMs: number;
  /** Sizing on (`maxBatch` > `batch`): batch and low-water mark from the observed rate. */
  private readonly sizing: boolean;
  /** Tokens left in leases[1..] (the fast path spends leases[0] only); kept by recount(). */
  private restBehind = 0;
  /** With sizing: when the newest lease is one lead time from its end (recount()); else never. */
  private refreshAtMs = Number.POSITIVE_INFINITY;
  /** Low-water mark in force (sized from the rate when sizing is on). */
  private lowWaterNow: number;
  /** Tokens taken since the client began (the rate estimate's numerator). */
  private taken = 0;
  private sampleAtMs: number | undefined;
  private sampleTaken = 0;
  /**
   * Time this client had no tokens for a take (from a failed take to the next grant): left
   * out of the rate's elapsed time, so a key that waits for its leases is sized by the rate
   * it is spent at while it has tokens, not by the rate its waits allow.
   */
  private dryMs = 0;
  private drySinceMs: number | undefined;
  private sampleDryMs = 0;
  private dryAtLastSizeMs = 0;
  private lastBatch: number;
  /** Observed tokens per ms, smoothed over acquires (sizing only). */
  private ratePerMs = 0;
  /** Observed acquire round-trip, smoothed (ms). */
  private rttMs = 1;
  private rttSeen = false;
  /** A lease that ended with tokens left waits in `finished` to go back (flushReturnable). */
  private returnable = false;

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
    this.releaseWhenSpent = options.releaseWhenSpent ?? false;
    this.pacingMs = options.pacingMs;
    this.clock = options.clock ?? monotonicNow;
    this.onError = options.onError ?? (() => {});
    if (!Number.isInteger(this.batch) || this.batch < 1 || this.batch > 1_000_000)
      throw new RangeError("batch in [1, 1e6]");
    if (!(this.marginMs < this.durationMs)) throw new RangeError("marginMs must be < durationMs");
    this.maxBatch = options.maxBatch ?? this.batch;
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < this.batch || this.maxBatch > 1_000_000)
      throw new RangeError("maxBatch must be an integer in [batch, 1e6]");
    this.sizeForMs = options.sizeForMs ?? this.durationMs / 2;
    if (!(this.sizeForMs > 0 && this.sizeForMs <= this.durationMs - this.marginMs))
      throw new RangeError("sizeForMs must be in (0, durationMs - marginMs]");
    this.sizing = this.maxBatch > this.batch;
    this.heldBound = leasedHeldBound({ batch: this.batch, lowWater: this.lowWater, maxBatch: this.maxBatch });
    this.lowWaterNow = this.lowWater;
    this.lastBatch = this.batch;
    // A lease released when spent is reported on its own: nothing rides with an acquire.
    this.renewer = canRenew(store) && !this.releaseWhenSpent ? store : undefined;
  }

  /** Tokens usable right now (expired leases excluded). */
  available(): number {
    const now = this.clock();
    this.dropExpired(now);
    if (this.finished.length > 0) this.flushReturnable(now);
    let sum = 0;
    for (const l of this.leases) sum += l.granted - l.used;
    return sum;
  }

  /**
   * Takes `cost` from held leases if they cover it; never waits. Starts a
   * background prefetch when the rest falls to the low-water mark (or, with
   * sizing, when the newest lease nears its end). The hot path allocates
   * nothing: when the oldest lease is usable now and covers `cost`, it is one
   * clock read and a few comparisons (no scan, no lookup).
   */
  tryTake(cost: number): boolean {
    const now = this.clock();
    const l = this.leases[0];
    // Fast path: the oldest lease, before its end (never past it: trap 6), covers the cost
    // and stays non-empty.
    if (l !== undefined && now < l.usableUntilMs && l.granted - l.used > cost && cost >= 0) {
      l.used += cost;
      this.taken += cost;
      if (l.granted - l.used + this.restBehind <= this.lowWaterNow || now >= this.refreshAtMs)
        this.prefetch(now);
      if (this.returnable) this.flushReturnable(now);
      return true;
    }
    return this.slowTake(cost, now);
  }

  private slowTake(cost: number, now: number): boolean {
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
      this.taken += cost;
      ok = true;
      this.retireUsedUp();
    } else if (this.drySinceMs === undefined) this.drySinceMs = now;
    this.recount();
    if (total <= this.lowWaterNow || now >= this.refreshAtMs) this.prefetch(now);
    // Tokens left in a lease that just ended and did not ride with a prefetch go back now.
    if (this.finished.length > 0) this.flushReturnable(now);
    return ok;
  }

  /**
   * Takes up to `want` whole tokens from held leases (oldest first) and
   * returns how many; never waits. Prefetches like `tryTake` when the rest
   * falls to the low-water mark.
   */
  takeUpTo(want: number): number {
    const now = this.clock();
    this.dropExpired(now);
    let need = Math.max(0, Math.floor(want));
    let taken = 0;
    for (let i = 0; i < this.leases.length && need > 0; i++) {
      const l = this.leases[i]!;
      const take = Math.min(need, l.granted - l.used);
      l.used += take;
      need -= take;
      taken += take;
    }
    this.taken += taken;
    if (taken > 0) this.retireUsedUp();
    this.recount();
    let rest = 0;
    for (const l of this.leases) rest += l.granted - l.used;
    if (rest <= this.lowWaterNow || now >= this.refreshAtMs) this.prefetch(now);
    if (this.finished.length > 0) this.flushReturnable(now);
    return taken;
  }

  /** The fast path's bookkeeping, after any change to `leases`: tokens behind the oldest lease, when to refresh. */
  private recount(): void {
    let behind = 0;
    for (let i = 1; i < this.leases.length; i++) behind += this.leases[i]!.granted - this.leases[i]!.used;
    this.restBehind = behind;
    const newest = this.leases[this.leases.length - 1];
    this.refreshAtMs =
      this.sizing && newest !== undefined ? newest.usableUntilMs - this.leadMs() : Number.POSITIVE_INFINITY;
  }

  /** How long before it is needed a lease must be asked for: two smoothed round-trips, at least 5 ms. */
  private leadMs(): number {
    return Math.max(5, 2 * this.rttMs);
  }

  /** Batch of the next acquire, and the low-water mark in force until it lands (sizing: from the rate). */
  private sizeNext(now: number): number {
    if (!this.sizing) return this.batch;
    if (this.sampleAtMs === undefined) {
      this.sampleAtMs = now;
      this.sampleTaken = this.taken;
    } else {
      const dry = this.dryMs - this.sampleDryMs + (this.drySinceMs !== undefined ? now - this.drySinceMs : 0);
      const served = now - this.sampleAtMs - dry;
      if (served >= 1) {
        const sample = (this.taken - this.sampleTaken) / served;
        this.ratePerMs = this.ratePerMs === 0 ? sample : 0.5 * this.ratePerMs + 0.5 * sample;
        this.sampleAtMs = now;
        this.sampleTaken = this.taken;
        this.sampleDryMs = this.dryMs + (this.drySinceMs !== undefined ? now - this.drySinceMs : 0);
      }
    }
    // A key that ran dry since the last acquire was held back by its waits, so the rate
    // understates its demand: at least double the last batch then (up to maxBatch); else the
    // last batch decays by a tenth per acquire towards the rate's.
    const wentDry = this.drySinceMs !== undefined || this.dryMs > this.dryAtLastSizeMs;
    const grow = wentDry ? 2 * this.lastBatch : Math.floor(0.9 * this.lastBatch);
    this.dryAtLastSizeMs = this.dryMs;
    const batch = Math.min(
      this.maxBatch,
      Math.max(this.batch, grow, Math.ceil(this.ratePerMs * this.sizeForMs)),
    );
    this.lastBatch = batch;
    this.lowWaterNow = Math.max(
      this.lowWater,
      Math.min(Math.floor(batch / 2), Math.ceil(this.ratePerMs * this.leadMs())),
    );
    return batch;
  }

  /** Resolves when the next acquire lands (or at close); never earlier. */
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

  private flushReturnable(now: number): void {
    this.returnable = false;
    for (let i = this.finished.length - 1; i >= 0; i--) {
      const l = this.finished[i]!;
      if (l.used < l.granted && now < l.goneAtStoreMs) {
        this.finished.splice(i, 1);
        this.release(l);
      }
    }
  }

  /**
   * Used-up leases at the front: released at once (`releaseWhenSpent`), or
   * moved to `finished` to ride with the next acquire (renewing stores), or
   * else kept until they expire.
   */
  private retireUsedUp(): void {
    if (!this.releaseWhenSpent && this.renewer === undefined) return;
    while (this.leases.length > 0 && this.leases[0]!.used >= this.leases[0]!.granted) {
      const l = this.leases.shift()!;
      if (this.releaseWhenSpent) this.release(l);
      else this.finished.push(l);
    }
    this.recount();
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
    // Never ask beyond what this client may hold (leasedHeldBound, reported as the process's
    // limit): a refresh timed by a lead that outgrew the round-trip (a slow stretch, then a
    // fast one) would otherwise land a third lease beside two that are still live.
    let held = 0;
    for (const l of this.leases) held += l.granted - l.used;
    const room = this.heldBound - held;
    if (room < 1) return;
    // Timed from here, before the request leaves: never from receipt.
    const sentAtMs = now;
    const batch = Math.min(this.sizeNext(now), room);
    const carried = this.finished.splice(0, MAX_CARRIED_RELEASES);
    const request =
      this.renewer !== undefined
        ? this.renewer.renewLease(this.policy, carried, batch, this.durationMs).then((r) => r.lease)
        : this.store.acquireLease(this.policy, batch, this.durationMs);
    this.inflight = request
      .then(
        (lease) => {
          const rtt = this.clock() - sentAtMs;
          this.rttMs = this.rttSeen ? 0.75 * this.rttMs + 0.25 * Math.max(0, rtt) : Math.max(0, rtt);
          this.rttSeen = true;
          if (this.pacingMs !== undefined && lease.granted < batch) {
            this.nextAcquireAtMs = this.clock() + this.pacingMs;
          } else if (lease.granted <= 0) this.nextAcquireAtMs = this.clock() + this.retryBackoffMs;
          if (lease.granted <= 0) return;
          // The store may grant less time than asked; never use more than it reserves.
          const held: HeldLease = {
            leaseId: lease.leaseId,
            granted: lease.granted,
            used: 0,
            ...leaseWindow(lease, sentAtMs, this.durationMs, this.marginMs, this.clock()),
          };
          // Also after close() began: it awaits this acquire, then reports every held lease
          // in one call.
          this.leases.push(held);
          this.recount();
          if (this.drySinceMs !== undefined) {
            this.dryMs += this.clock() - this.drySinceMs;
            this.drySinceMs = undefined;
          }
        },
        (err: unknown) => {
          this.nextAcquireAtMs = this.clock() + this.retryBackoffMs;
          // The releases may not have been applied: report them again (a repeated release
          // of the same lease changes nothing).
          this.finished.push(...carried);
          if (carried.some((l) => l.used < l.granted)) this.returnable = true;
          this.onError(err);
        },
      )
      .finally(() => {
        this.inflight = undefined;
        const landed = this.landed;
        this.landed = undefined;
        landed?.resolve();
      });
  }

  private dropExpired(now: number): void {
    while (this.leases.length > 0 && now >= this.leases[0]!.usableUntilMs) {
      this.ended(this.leases.shift()!);
    }
    // Leases are pushed in send order, but a shorter grant may expire earlier.
    for (let i = this.leases.length - 1; i >= 0; i--) {
      const l = this.leases[i]!;
      if (now >= l.usableUntilMs) {
        this.leases.splice(i, 1);
        this.ended(l);
      }
    }
    // A used-up lease at its end needs no report: the bucket counts it as used when it expires.
    for (let i = this.finished.length - 1; i >= 0; i--) {
      const l = this.finished[i]!;
      if (l.used >= l.granted && now >= l.usableUntilMs) this.finished.splice(i, 1);
    }
    this.recount();
  }

  /** A lease this client stops using at its end. */
  private ended(l: HeldLease): void {
    if (this.renewer === undefined) {
      // Report usage; the store ignores the return part if it has expired there too.
      this.release(l);
      return;
    }
    // Renewing store: nothing to report for a used-up lease or one the store has certainly
    // expired (it counts as used there). Tokens left ride with the prefetch this end usually
    // triggers, or go back on their own right after (flushReturnable).
    if (l.used < l.granted && this.clock() < l.goneAtStoreMs) {
      this.finished.push(l);
      this.returnable = true;
    }
  }

  private release(l: HeldLease): Promise<void> {
    const p: Promise<void> = this.store
      .releaseLease(this.policy, l.leaseId, l.used)
      .catch(this.onError)
      .finally(() => this.releasing.delete(p));
    this.releasing.add(p);
    return p;
  }

  /** Stops serving, reports used and returns unused tokens of every held lease; waits for every release sent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inflight !== undefined) await this.inflight;
    this.landed?.resolve();
    const all = [...this.finished.splice(0), ...this.leases.splice(0)];
    this.recount();
    const renewer = this.renewer;
    if (renewer === undefined) {
      for (const l of all) this.release(l);
      await Promise.all([...this.releasing]);
      return;
    }
    // Only a lease with tokens left needs the call (used-up ones ride along, freeing their
    // capacity early); none the store has certainly expired. Release only (0 tokens), one
    // call per MAX_CARRIED_RELEASES leases.
    const now = this.clock();
    const held = all.filter((l) => now < l.goneAtStoreMs);
    if (!held.some((l) => l.used < l.granted)) {
      await Promise.all([...this.releasing]);
      return;
    }
    const calls: Promise<unknown>[] = [...this.releasing];
    for (let i = 0; i < held.length; i += MAX_CARRIED_RELEASES) {
      const part = held.slice(i, i + MAX_CARRIED_RELEASES);
      calls.push(renewer.renewLease(this.policy, part, 0, this.durationMs).catch(this.onError));
    }
    await Promise.all(calls);
  }
}
