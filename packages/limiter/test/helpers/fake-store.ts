// In-memory RegionStore for unit tests (never shipped as a fallback). A token
// bucket per key at the policy's base share, lazy refill on an injected clock,
// and leases that stay counted against capacity (tokens + outstanding ≤ cap)
// until released or expired, as DESIGN §7 requires of the real store.
import {
  type CompoundDecision,
  type Decision,
  type KeyPolicy,
  type Lease,
  type QuotaView,
  type RefundOutcome,
  type RefundReceiptRef,
  type RegionStore,
  SHARE_UNITS,
} from "@geoquota/core";

interface LeaseState {
  tokens: number;
  expiryUs: number;
}
interface Bucket {
  tokens: number;
  tsUs: number;
  leases: Map<string, LeaseState>;
  admitted: number;
  refunded: number;
  denied: number;
}

export interface FakeStoreOptions {
  region?: string;
  /** Microseconds; defaults to a manual clock starting at 1e12 µs. */
  nowUs?: () => number;
}

export class FakeStore implements RegionStore {
  readonly region: string;
  private readonly buckets = new Map<string, Bucket>();
  private manualUs = 1e12;
  private readonly nowFn: () => number;
  private leaseSeq = 0;
  /** When set, every call rejects with this error. */
  failWith: Error | undefined;
  /** When > 0, every call answers after this many ms of real time. */
  delayMs = 0;
  /** When true, calls never answer. */
  hang = false;
  readonly calls: { op: string; atUs: number }[] = [];
  readonly released: { leaseId: string; used: number }[] = [];
  private readonly usedReceipts = new Set<string>();

  constructor(options: FakeStoreOptions = {}) {
    this.region = options.region ?? "us-east";
    this.nowFn = options.nowUs ?? (() => this.manualUs);
  }

  advanceMs(ms: number): void {
    this.manualUs += ms * 1000;
  }

  private async gate(op: string): Promise<number> {
    this.calls.push({ op, atUs: this.nowFn() });
    if (this.hang) await new Promise(() => {});
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.failWith !== undefined) throw this.failWith;
    return this.nowFn();
  }

  private slice(p: KeyPolicy): { cap: number; rate: number } {
    return {
      cap: (p.limit.capacity * p.baseShare) / SHARE_UNITS,
      rate: (p.limit.refillPerSecond * p.baseShare) / SHARE_UNITS,
    };
  }

  private bucket(p: KeyPolicy, nowUs: number): Bucket {
    const key = `${p.tenant}|${p.resource}`;
    const { cap, rate } = this.slice(p);
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: cap, tsUs: nowUs, leases: new Map(), admitted: 0, refunded: 0, denied: 0 };
      this.buckets.set(key, b);
    }
    // Expired leases stop being reserved (their unused tokens are simply gone).
    for (const [id, l] of b.leases) if (nowUs >= l.expiryUs) b.leases.delete(id);
    const outstanding = this.outstanding(b);
    const elapsed = Math.max(0, nowUs - b.tsUs) / 1e6;
    b.tokens = Math.min(cap - outstanding, b.tokens + rate * elapsed);
    b.tsUs = nowUs;
    return b;
  }

  private outstanding(b: Bucket): number {
    let s = 0;
    for (const l of b.leases.values()) s += l.tokens;
    return s;
  }

  private decide(p: KeyPolicy, b: Bucket, allowed: boolean, cost: number, nowUs: number): Decision {
    const { cap, rate } = this.slice(p);
    const remaining = Math.max(0, b.tokens);
    return {
      allowed,
      limit: p.limit.capacity,
      remaining,
      resetSeconds: rate > 0 ? (cap - remaining) / rate : 0,
      retryAfterSeconds: allowed ? 0 : cost > cap ? Number.POSITIVE_INFINITY : (cost - remaining) / rate,
      share: p.baseShare,
      nowUs,
      recovering: false,
    };
  }

  async check(policy: KeyPolicy, cost: number): Promise<Decision> {
    const now = await this.gate("check");
    const b = this.bucket(policy, now);
    const allowed = b.tokens >= cost;
    if (allowed) {
      b.tokens -= cost;
      b.admitted += cost;
    } else b.denied += cost;
    return this.decide(policy, b, allowed, cost, now);
  }

  async checkCompound(items: readonly { policy: KeyPolicy; cost: number }[]): Promise<CompoundDecision> {
    const now = await this.gate("checkCompound");
    const buckets = items.map((i) => this.bucket(i.policy, now));
    const failedIndex = items.findIndex((i, idx) => buckets[idx]!.tokens < i.cost);
    const allowed = failedIndex === -1;
    const parts = items.map((i, idx) => {
      const b = buckets[idx]!;
      if (allowed) {
        b.tokens -= i.cost;
        b.admitted += i.cost;
      } else if (idx === failedIndex) b.denied += i.cost;
      return this.decide(i.policy, b, allowed, i.cost, now);
    });
    return { allowed, parts, failedIndex };
  }

  async refund(policy: KeyPolicy, cost: number, receipt: RefundReceiptRef): Promise<RefundOutcome> {
    const now = await this.gate("refund");
    // As lua/refund.lua: each receipt once, before its expiry (the fake never loses state).
    if (now >= receipt.expiresUs) return { refunded: false, reason: "expired", nowUs: now };
    if (this.usedReceipts.has(receipt.id)) return { refunded: false, reason: "used", nowUs: now };
    this.usedReceipts.add(receipt.id);
    const b = this.bucket(policy, now);
    const { cap } = this.slice(policy);
    b.tokens = Math.min(cap - this.outstanding(b), b.tokens + cost);
    b.refunded += cost;
    return { refunded: true, decision: this.decide(policy, b, true, 0, now) };
  }

  async acquireLease(policy: KeyPolicy, tokens: number, durationMs: number): Promise<Lease> {
    const now = await this.gate("acquireLease");
    const b = this.bucket(policy, now);
    const granted = Math.max(0, Math.min(tokens, Math.floor(b.tokens)));
    const leaseId = `L${++this.leaseSeq}`;
    const expiryUs = now + durationMs * 1000;
    if (granted > 0) {
      b.tokens -= granted;
      b.leases.set(leaseId, { tokens: granted, expiryUs });
    }
    return { leaseId, granted, expiryUs, nowUs: now };
  }

  async releaseLease(policy: KeyPolicy, leaseId: string, used: number): Promise<void> {
    const now = await this.gate("releaseLease");
    this.released.push({ leaseId, used });
    const b = this.bucket(policy, now);
    const l = b.leases.get(leaseId);
    b.admitted += used;
    if (l === undefined) return;
    b.leases.delete(leaseId);
    b.tokens += Math.max(0, l.tokens - used);
  }

  async inspect(policy: KeyPolicy): Promise<QuotaView> {
    const now = await this.gate("inspect");
    const b = this.bucket(policy, now);
    const replica = `${this.region}.1`;
    return {
      tenant: policy.tenant,
      resource: policy.resource,
      nowUs: now,
      share: policy.baseShare,
      recovering: false,
      tokens: b.tokens,
      counters: {
        admitted: { [replica]: b.admitted },
        refunded: { [replica]: b.refunded },
        denied: { [replica]: b.denied },
      },
      loansOut: [],
      loansIn: [],
    };
  }

  /** Leased tokens currently reserved for a key (tests assert tokens + this ≤ cap). */
  outstandingFor(policy: KeyPolicy): number {
    const b = this.buckets.get(`${policy.tenant}|${policy.resource}`);
    return b === undefined ? 0 : this.outstanding(b);
  }

  async close(): Promise<void> {}
}
