// The tenant's share of its global quota in this process: one leased client
// per stream resource (bytes, frames), shared by all of the tenant's
// connections here, so they draw on one regional bucket each (DESIGN §7's
// leased path) and together obey the tenant's global bound.
import type { KeyPolicy } from "@geoquota/core";
import type { LeasedClient } from "@geoquota/limiter";

/** Lease sizing for one resource; defaults derive from the region's slice (see `leaseSizing`). */
export interface LeaseSizing {
  readonly batch?: number;
  readonly lowWater?: number;
}

/**
 * Default batch: a tenth of a second of the region's base slice rate, at most
 * a quarter of the slice's capacity (leased tokens idle in this process count
 * against the bucket, so big batches starve other processes of burst), at
 * least 1. Byte costs are far larger than a batch may be: frames pay in
 * several takes (see `LeasedClient.takeUpTo`), so a batch needs no relation to
 * the largest frame.
 */
export function leaseSizing(
  policy: KeyPolicy,
  sizing: LeaseSizing = {},
): { batch: number; lowWater: number } {
  const share = policy.baseShare / 1_000_000;
  const sliceCap = policy.limit.capacity * share;
  const sliceRate = policy.limit.refillPerSecond * share;
  const batch =
    sizing.batch ?? Math.max(1, Math.min(1_000_000, Math.floor(Math.min(sliceRate * 0.1, sliceCap / 4))));
  const lowWater = sizing.lowWater ?? Math.floor(batch / 2);
  return { batch, lowWater };
}

export interface TenantQuota {
  readonly tenant: string;
  readonly bytes: LeasedClient;
  readonly frames: LeasedClient;
}

interface Entry {
  readonly quota: TenantQuota;
  refs: number;
}

/**
 * Ref-counted tenant quotas: created on a tenant's first connection, closed
 * (unused leased tokens returned) when its last connection closes. Bounded:
 * `acquire` returns undefined when `maxTenants` tenants are active.
 */
export class TenantQuotas {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly create: (tenant: string) => TenantQuota,
    private readonly maxTenants: number,
  ) {}

  acquire(tenant: string): TenantQuota | undefined {
    let e = this.entries.get(tenant);
    if (e === undefined) {
      if (this.entries.size >= this.maxTenants) return undefined;
      e = { quota: this.create(tenant), refs: 0 };
      this.entries.set(tenant, e);
    }
    e.refs++;
    return e.quota;
  }

  async release(tenant: string): Promise<void> {
    const e = this.entries.get(tenant);
    if (e === undefined) return;
    e.refs--;
    if (e.refs > 0) return;
    this.entries.delete(tenant);
    await Promise.all([e.quota.bytes.close(), e.quota.frames.close()]);
  }

  get size(): number {
    return this.entries.size;
  }

  async close(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.flatMap((e) => [e.quota.bytes.close(), e.quota.frames.close()]));
  }
}
