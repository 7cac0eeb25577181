// The streaming limiter: wraps `ws` server connections so that a tenant's
// inbound frames and bytes draw on its global quota (two token-bucket
// resources, leased in-process from this region's bucket) behind a
// per-connection cap. See README.md for the mechanism and its bounds.
import { KEY_MAX_LENGTH, KEY_PATTERN, type KeyPolicy, type RegionStore } from "@geoquota/core";
import { type PolicySet, quotaKey, resolvePolicy } from "@geoquota/config";
import { LeasedClient, type LeasedClientOptions } from "@geoquota/limiter";
import { type MonotonicClock, monotonicNow } from "@geoquota/limiter/internal";
import { Registry } from "prom-client";
import type { WebSocket } from "ws";
import { LocalBucket } from "./local-bucket.js";
import {
  CLOSE_CODES,
  type ConnectionLimits,
  type FrameHandler,
  MeteredConnection,
} from "./metered-connection.js";
import { createStreamMetrics, type StreamMetrics } from "./metrics.js";
import { type LeaseSizing, leaseSizing, type TenantQuota, TenantQuotas } from "./tenant-quota.js";

/**
 * How streams run the limiter's `LeasedClient`: byte costs are paid partially
 * (`takeUpTo`), a used-up lease is released at once (held to expiry, its tokens
 * stay counted against the bucket and cap a stream near C_slice per lease
 * duration), and after a short grant the next acquire waits 50 ms.
 */
export const STREAM_LEASE_MODE = {
  releaseWhenSpent: true,
  pacingMs: 50,
} as const satisfies LeasedClientOptions;

/** Resource names the limiter meters (policies are looked up under these). */
export interface StreamResources {
  /** The tenant's global byte quota (default `stream_bytes`). */
  readonly bytes: string;
  /** The tenant's global frame quota (default `stream_frames`). */
  readonly frames: string;
  /** Optional per-connection cap on bytes (default `stream_conn_bytes`): used only when a policy names it. */
  readonly connectionBytes: string;
  /** Optional per-connection cap on frames (default `stream_conn_frames`). */
  readonly connectionFrames: string;
}

export const DEFAULT_RESOURCES: StreamResources = {
  bytes: "stream_bytes",
  frames: "stream_frames",
  connectionBytes: "stream_conn_bytes",
  connectionFrames: "stream_conn_frames",
};

export interface StreamLimiterOptions {
  /** This region's store (createRedisStore on the region's own Redis). Not closed by close(). */
  readonly store: RegionStore;
  readonly policies: PolicySet;
  /** Every configured region (ids), for the base shares. */
  readonly regions: readonly (string | { readonly id: string })[];
  readonly regionId: string;
  /** Metrics go here; a private registry when absent. */
  readonly registry?: Registry;
  readonly resources?: Partial<StreamResources>;
  /**
   * Per-connection cap when no `stream_conn_*` policy applies: this fraction
   * of the tenant's global capacity and rate (default 0.5; 1 lets one
   * connection use the tenant's whole quota).
   */
  readonly connectionShare?: number;
  readonly lease?: {
    readonly bytes?: LeaseSizing;
    readonly frames?: LeaseSizing;
    /** Lease duration asked of the store, ≤ D (default 2000 ms). */
    readonly durationMs?: number;
    readonly marginMs?: number;
    /** After a short grant, the next acquire of that key waits this long (default 50 ms). */
    readonly pacingMs?: number;
  };
  /** Largest inbound payload; bigger closes with 1009 (default 1 MiB). Set ws `maxPayload` to the same. */
  readonly frameBytesMax?: number;
  /** Longest wait before re-checking tokens (default 50 ms). */
  readonly pollMaxMs?: number;
  /** Active tenants in this process; a new tenant beyond it is closed with 1013 (default 10 000). */
  readonly maxTenants?: number;
  /** Open metered connections; beyond it new ones are closed with 1013 (default 10 000). */
  readonly maxConnections?: number;
  /** Floor per region when the policy has none (region config's floorPpm). */
  readonly floorPpm?: number;
  readonly clock?: MonotonicClock;
  /** Background errors (lease acquire/release, handler throws); never thrown. */
  readonly onError?: (err: unknown) => void;
}

export interface AttachOptions {
  readonly tenant: string;
  readonly onFrame: FrameHandler;
}

export type AttachResult =
  | { readonly ok: true; readonly connection: MeteredConnection }
  | { readonly ok: false; readonly reason: "invalid_tenant" | "policy" | "tenants" | "connections" };

/** A per-connection limit as (capacity, rate). */
interface Limit {
  readonly capacity: number;
  readonly refillPerSecond: number;
}

export class StreamLimiter {
  readonly metrics: StreamMetrics;
  readonly registry: Registry;
  private readonly resources: StreamResources;
  private readonly quotas: TenantQuotas;
  private readonly connections = new Set<MeteredConnection>();
  private readonly store: RegionStore;
  private readonly clock: MonotonicClock;
  private readonly onError: (err: unknown) => void;
  private readonly frameBytesMax: number;
  private closed = false;
  private nextConnectionId = 1;

  constructor(private readonly options: StreamLimiterOptions) {
    this.registry = options.registry ?? new Registry();
    this.metrics = createStreamMetrics(this.registry);
    this.resources = { ...DEFAULT_RESOURCES, ...options.resources };
    this.clock = options.clock ?? monotonicNow;
    this.onError = options.onError ?? (() => {});
    this.frameBytesMax = options.frameBytesMax ?? 1024 * 1024;
    const share = options.connectionShare ?? 0.5;
    if (!(share > 0 && share <= 1)) throw new RangeError("connectionShare must be in (0, 1]");
    if (!(this.frameBytesMax >= 1 && this.frameBytesMax <= 64 * 1024 * 1024))
      throw new RangeError("frameBytesMax must be in [1, 64 MiB]");
    this.store = options.store;
    this.quotas = new TenantQuotas((t) => this.createQuota(t), options.maxTenants ?? 10_000);
  }

  /** The tenant's key policy for a resource in this region. */
  policy(tenant: string, resource: string): KeyPolicy {
    const o = this.options;
    return resolvePolicy(
      o.policies,
      o.regions,
      o.regionId,
      tenant,
      resource,
      o.floorPpm !== undefined ? { floorPpm: o.floorPpm } : {},
    );
  }

  private createQuota(tenant: string): TenantQuota {
    const lease = this.options.lease ?? {};
    const bucket = (resource: string, sizing: LeaseSizing | undefined) => {
      const policy = this.policy(tenant, resource);
      return new LeasedClient(this.store, policy, {
        ...STREAM_LEASE_MODE,
        ...leaseSizing(policy, sizing),
        ...(lease.durationMs !== undefined ? { durationMs: lease.durationMs } : {}),
        ...(lease.marginMs !== undefined ? { marginMs: lease.marginMs } : {}),
        ...(lease.pacingMs !== undefined ? { pacingMs: lease.pacingMs } : {}),
        clock: this.clock,
        onError: this.onError,
      });
    };
    return {
      tenant,
      bytes: bucket(this.resources.bytes, lease.bytes),
      frames: bucket(this.resources.frames, lease.frames),
    };
  }

  /** `stream_conn_*` policy when the file names one for this tenant (or `*`), else a share of the tenant's limit. */
  private connectionLimit(tenant: string, resource: string, tenantPolicy: KeyPolicy): Limit {
    const set = this.options.policies;
    const spec = set.entries.get(quotaKey(tenant, resource)) ?? set.entries.get(quotaKey("*", resource));
    if (spec !== undefined) return { capacity: spec.capacity, refillPerSecond: spec.refillPerSecond };
    const share = this.options.connectionShare ?? 0.5;
    return {
      capacity: Math.max(1, tenantPolicy.limit.capacity * share),
      refillPerSecond: tenantPolicy.limit.refillPerSecond * share,
    };
  }

  /** The metrics label: the tenant when a stream policy names it, else "default" (bounded cardinality). */
  tenantClass(tenant: string): string {
    const e = this.options.policies.entries;
    return e.has(quotaKey(tenant, this.resources.bytes)) || e.has(quotaKey(tenant, this.resources.frames))
      ? tenant
      : "default";
  }

  /**
   * Meters an open server-side connection. On refusal the socket is closed
   * (1008 invalid tenant or unmeterable policy, 1013 too many tenants or
   * connections) and the reason returned.
   */
  attach(ws: WebSocket, options: AttachOptions): AttachResult {
    const { tenant } = options;
    const refuse = (reason: "invalid_tenant" | "policy" | "tenants" | "connections", code: number) => {
      this.metrics.rejectedConnections.inc({ reason });
      ws.close(code, reason);
      return { ok: false as const, reason };
    };
    if (this.closed) return refuse("connections", CLOSE_CODES.goingAway);
    if (tenant.length === 0 || tenant.length > KEY_MAX_LENGTH || !KEY_PATTERN.test(tenant))
      return refuse("invalid_tenant", CLOSE_CODES.policyViolation);
    const bytesPolicy = this.policy(tenant, this.resources.bytes);
    const framesPolicy = this.policy(tenant, this.resources.frames);
    // The leased path exists for token buckets only (limiter GQ_ERR_LEASE_ALGORITHM).
    if (bytesPolicy.limit.algorithm !== "token_bucket" || framesPolicy.limit.algorithm !== "token_bucket")
      return refuse("policy", CLOSE_CODES.policyViolation);
    if (this.connections.size >= (this.options.maxConnections ?? 10_000))
      return refuse("connections", CLOSE_CODES.tryAgainLater);
    const quota = this.quotas.acquire(tenant);
    if (quota === undefined) return refuse("tenants", CLOSE_CODES.tryAgainLater);

    const cb = this.connectionLimit(tenant, this.resources.connectionBytes, bytesPolicy);
    const cf = this.connectionLimit(tenant, this.resources.connectionFrames, framesPolicy);
    const shareOf = (p: KeyPolicy) => (p.limit.refillPerSecond * p.baseShare) / 1_000_000;
    const limits: ConnectionLimits = {
      frameBytesMax: this.frameBytesMax,
      // One socket read (≤ 64 KiB) plus one max-size frame can be in ws when we
      // pause; twice that is a generous bound that still catches a bug.
      queueBytesMax: 2 * this.frameBytesMax + 1024 * 1024,
      queueFramesMax: 200_000,
      pollMaxMs: this.options.pollMaxMs ?? 50,
      sliceBytesPerSecond: Math.max(1e-9, shareOf(bytesPolicy)),
      sliceFramesPerSecond: Math.max(1e-9, shareOf(framesPolicy)),
    };
    const conn = new MeteredConnection({
      id: this.nextConnectionId++,
      ws,
      tenant,
      tenantClass: this.tenantClass(tenant),
      quota,
      local: {
        bytes: new LocalBucket(cb.capacity, cb.refillPerSecond, this.clock),
        frames: new LocalBucket(cf.capacity, cf.refillPerSecond, this.clock),
      },
      limits,
      metrics: this.metrics,
      clock: this.clock,
      onFrame: options.onFrame,
      onError: this.onError,
      onClosed: () => {
        this.connections.delete(conn);
        this.metrics.connections.dec();
        this.quotas.release(tenant).catch(this.onError);
      },
    });
    this.connections.add(conn);
    this.metrics.connections.inc();
    return { ok: true, connection: conn };
  }

  /** Open metered connections (a snapshot). */
  openConnections(): MeteredConnection[] {
    return [...this.connections];
  }

  /** Closes every metered connection (1001) and returns unused leased tokens. Does not close the store. */
  async close(): Promise<void> {
    this.closed = true;
    for (const c of [...this.connections]) c.close(CLOSE_CODES.goingAway, "server closing");
    await this.quotas.close();
  }
}
