// Per-key leased clients of one process, bounded: the service's leased path
// and its fail-closed-to-leases mode both go through this pool.
//
// `get` runs once per leased decision, so its hit is kept to one WeakMap
// lookup by the policy object (the limiter resolves a key's policy once and
// hands the same object to every check of it) and one flag write: no key
// string built, no policy compared, no Map re-insert (issue 24 point 4: those
// made the pooled path 0.91x RateLimiterMemory). Recency is the "second
// chance" approximation of LRU: a hit marks its entry; the eviction scan
// moves marked entries to the young end (clearing the mark) and evicts the
// first unmarked one, so a key used since the last scan is never the one
// evicted while an unused one remains.
import { LeasedClient, type LeasedClientOptions } from "./leased-client.js";
import { type KeyPolicy, quotaKey, type RegionStore } from "@geoquota/core";

export interface LeasePoolOptions extends LeasedClientOptions {
  readonly maxKeys: number;
}

interface Entry {
  readonly key: string;
  readonly client: LeasedClient;
  /** Used since the eviction scan last passed it. */
  recent: boolean;
  /** Still the pool's client for its key (false once replaced or evicted). */
  live: boolean;
}

export class LeasePool {
  /** Insertion order is the scan order: oldest (or longest unmarked) first. */
  private readonly entries = new Map<string, Entry>();
  /** Fast path: the entry a policy object was last served. */
  private readonly byPolicy = new WeakMap<KeyPolicy, Entry>();

  constructor(
    private readonly store: RegionStore,
    private readonly options: LeasePoolOptions,
  ) {
    if (!Number.isInteger(options.maxKeys) || options.maxKeys < 1)
      throw new RangeError(`maxKeys must be a positive integer, got ${options.maxKeys}`);
  }

  static keyOf(policy: KeyPolicy): string {
    return quotaKey(policy.tenant, policy.resource);
  }

  /** The client for this key, if one exists (never creates: used on the degraded path). */
  peek(policy: KeyPolicy): LeasedClient | undefined {
    return this.entries.get(LeasePool.keyOf(policy))?.client;
  }

  /** The client for this key, created on first use; a changed policy replaces it. */
  get(policy: KeyPolicy): LeasedClient {
    const hit = this.byPolicy.get(policy);
    if (hit?.live === true) {
      hit.recent = true;
      return hit.client;
    }
    return this.slowGet(policy);
  }

  /** A policy object not seen yet (or whose entry went): find the key's entry by name. */
  private slowGet(policy: KeyPolicy): LeasedClient {
    const key = LeasePool.keyOf(policy);
    let e = this.entries.get(key);
    if (e !== undefined && !samePolicy(e.client.policy, policy)) {
      this.drop(e);
      e = undefined;
    }
    if (e === undefined) {
      if (this.entries.size >= this.options.maxKeys) this.evictOne();
      e = { key, client: new LeasedClient(this.store, policy, this.options), recent: false, live: true };
      this.entries.set(key, e);
    } else {
      e.recent = true;
    }
    this.byPolicy.set(policy, e);
    return e.client;
  }

  private drop(e: Entry): void {
    e.live = false;
    this.entries.delete(e.key);
    void e.client.close();
  }

  /** Second chance: marked entries move to the young end unmarked; the first unmarked one goes. */
  private evictOne(): void {
    // Bounded: after one pass every mark is cleared, so the next entry looked at is evicted.
    for (let i = 0; i <= this.entries.size; i++) {
      const first = this.entries.values().next();
      if (first.done) return;
      const e = first.value;
      if (!e.recent) {
        this.drop(e);
        return;
      }
      e.recent = false;
      this.entries.delete(e.key);
      this.entries.set(e.key, e);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  async close(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    for (const e of all) e.live = false;
    await Promise.all(all.map((e) => e.client.close()));
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
