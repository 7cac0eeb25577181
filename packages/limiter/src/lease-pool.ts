// Per-key leased clients of one process, bounded (LRU): the service's leased
// path and its fail-closed-to-leases mode both go through this pool.
import { LeasedClient, type LeasedClientOptions } from "./leased-client.js";
import { type KeyPolicy, quotaKey, type RegionStore } from "@geoquota/core";

export interface LeasePoolOptions extends LeasedClientOptions {
  readonly maxKeys: number;
}

export class LeasePool {
  private readonly clients = new Map<string, LeasedClient>();

  constructor(
    private readonly store: RegionStore,
    private readonly options: LeasePoolOptions,
  ) {}

  static keyOf(policy: KeyPolicy): string {
    return quotaKey(policy.tenant, policy.resource);
  }

  /** The client for this key, if one exists (never creates: used on the degraded path). */
  peek(policy: KeyPolicy): LeasedClient | undefined {
    return this.clients.get(LeasePool.keyOf(policy));
  }

  /** The client for this key, created on first use; a changed policy replaces it. */
  get(policy: KeyPolicy): LeasedClient {
    const key = LeasePool.keyOf(policy);
    let c = this.clients.get(key);
    if (c !== undefined && !samePolicy(c.policy, policy)) {
      this.clients.delete(key);
      void c.close();
      c = undefined;
    }
    if (c === undefined) {
      c = new LeasedClient(this.store, policy, this.options);
      if (this.clients.size >= this.options.maxKeys) {
        const oldest = this.clients.keys().next();
        if (!oldest.done) {
          void this.clients.get(oldest.value)?.close();
          this.clients.delete(oldest.value);
        }
      }
    } else {
      // Re-insert: Map order is the LRU order.
      this.clients.delete(key);
    }
    this.clients.set(key, c);
    return c;
  }

  get size(): number {
    return this.clients.size;
  }

  async close(): Promise<void> {
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(all.map((c) => c.close()));
  }
}

function samePolicy(a: KeyPolicy, b: KeyPolicy): boolean {
  return (
    a === b ||
    (a.baseShare === b.baseShare &&
      a.floorShare === b.floorShare &&
      a.limit.algorithm === b.limit.algorithm &&
      a.limit.capacity === b.limit.capacity &&
      a.limit.refillPerSecond === b.limit.refillPerSecond &&
      a.limit.windowMs === b.limit.windowMs)
  );
}
