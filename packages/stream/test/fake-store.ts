// An in-memory RegionStore for unit tests: one token bucket per key on an
// injected clock, leases counted against capacity like the Lua scripts
// (tokens + outstanding ≤ capacity). Only what the stream package calls.
import type { KeyPolicy, Lease, RegionStore } from "@geoquota/core";

interface Bucket {
  tokens: number;
  lastMs: number;
  leases: Map<string, { tokens: number; expiryMs: number }>;
}

export class FakeStore implements RegionStore {
  readonly region = "local";
  readonly buckets = new Map<string, Bucket>();
  acquires = 0;
  releases: { leaseId: string; used: number; atMs: number }[] = [];
  private seq = 0;

  constructor(private readonly clock: () => number) {}

  private bucket(p: KeyPolicy): Bucket {
    const key = `${p.tenant}|${p.resource}`;
    let b = this.buckets.get(key);
    const now = this.clock();
    if (b === undefined) {
      b = { tokens: (p.limit.capacity * p.baseShare) / 1e6, lastMs: now, leases: new Map() };
      this.buckets.set(key, b);
    }
    for (const [id, l] of b.leases) if (now >= l.expiryMs) b.leases.delete(id);
    let outstanding = 0;
    for (const l of b.leases.values()) outstanding += l.tokens;
    const cap = (p.limit.capacity * p.baseShare) / 1e6 - outstanding;
    const rate = (p.limit.refillPerSecond * p.baseShare) / 1e6;
    b.tokens = Math.min(cap, b.tokens + ((now - b.lastMs) * rate) / 1000);
    b.lastMs = now;
    return b;
  }

  async acquireLease(p: KeyPolicy, tokens: number, durationMs: number): Promise<Lease> {
    this.acquires++;
    const b = this.bucket(p);
    const granted = Math.max(0, Math.min(tokens, Math.floor(b.tokens)));
    const leaseId = `l${++this.seq}`;
    const now = this.clock();
    if (granted > 0) {
      b.tokens -= granted;
      b.leases.set(leaseId, { tokens: granted, expiryMs: now + durationMs });
    }
    return { leaseId, granted, expiryUs: (now + durationMs) * 1000, nowUs: now * 1000 };
  }

  async releaseLease(p: KeyPolicy, leaseId: string, used: number): Promise<void> {
    this.releases.push({ leaseId, used, atMs: this.clock() });
    const b = this.bucket(p);
    const l = b.leases.get(leaseId);
    if (l === undefined) return;
    b.leases.delete(leaseId);
    b.tokens += Math.max(0, l.tokens - used);
  }

  check(): never {
    throw new Error("not used");
  }
  checkCompound(): never {
    throw new Error("not used");
  }
  refund(): never {
    throw new Error("not used");
  }
  inspect(): never {
    throw new Error("not used");
  }
  async close(): Promise<void> {}
}
