// The decision engine behind the HTTP service and the Fastify plugin: policy
// resolution, key hygiene, the guarded store (timeout + breaker), the leased
// path and the degraded path (fail-closed-to-leases, or explicit fail-open).
import {
  lookupPolicy,
  type PolicySet,
  quotaKey,
  type RegionConfig,
  resolveEffective,
} from "@geoquota/config";
import { CircuitBreaker } from "./breaker.js";
import { type MonotonicClock, monotonicNow } from "./clock.js";
import { isStoreUnavailable, LimiterError } from "./errors.js";
import { type FailOpenBound, FailOpenBuckets } from "./fail-open.js";
import { GuardedStore, type StoreErrorKind } from "./guarded-store.js";
import { hashKey, keyHashSecretOf, storedKeyPart } from "./key-hygiene.js";
import { LeasePool } from "./lease-pool.js";
import { ReceiptSigner } from "./receipts.js";
import { breakerStateValue, type LimiterMetrics } from "./metrics.js";
import {
  type Decision,
  type KeyPolicy,
  type QuotaView,
  type RegionStore,
  SHARE_UNITS,
  StoreMisuseError,
} from "./types.js";

/** The parts of a region config the engine reads. */
export type LimiterConfig = Pick<
  RegionConfig,
  "region" | "regions" | "redis" | "breaker" | "failMode" | "leased" | "floorPpm" | "keyMaxLength" | "refund"
> & { readonly keyHashSecret?: string; readonly sharedSecret?: string };

export type DecisionSource = "store" | "lease" | "fail_open" | "unavailable";

/**
 * Whose quota `remaining` counts: the region's bucket (a store decision), or
 * this process's own tokens (held leases, fail-open bucket, store unavailable).
 */
export type LimitScope = "region" | "process";

export interface CheckResult {
  readonly allowed: boolean;
  /** The global capacity C of the key's policy. */
  readonly limit: number;
  /** Cost the scope could still admit now (≥ 0, fractional). */
  readonly remaining: number;
  readonly scope: LimitScope;
  /**
   * Capacity of the scope: the region's current slice C·share/U, or the most
   * tokens this process holds for the key (fail-open: its bucket C·b/U).
   */
  readonly scopeLimit: number;
  readonly resetSeconds: number;
  readonly retryAfterSeconds: number;
  readonly region: string;
  readonly degraded: boolean;
  readonly source: DecisionSource;
  readonly policy: KeyPolicy;
  /** Present only for fail-open admissions/denials: this process's overshoot bound. */
  readonly failOpenBound?: FailOpenBound;
  /**
   * Allowed by the store only: what POST /v1/refund takes to give the cost back. Absent on
   * admissions from an in-process lease or fail-open (no Redis record to bound a refund by).
   */
  readonly refundReceipt?: string;
}

export interface RefundResult extends CheckResult {
  /** Cost given back. */
  readonly refunded: number;
}

export interface CompoundItem {
  readonly tenant: string;
  readonly resource: string;
  readonly cost: number;
}

export interface CompoundResult {
  readonly allowed: boolean;
  /** Index of the first limit that denied, −1 when allowed. */
  readonly failedIndex: number;
  readonly parts: readonly CheckResult[];
  readonly degraded: boolean;
}

export interface LimiterDeps {
  readonly store: RegionStore;
  readonly config: LimiterConfig;
  readonly policies: PolicySet;
  readonly metrics?: LimiterMetrics;
  readonly clock?: MonotonicClock;
  /** Readiness probe (e.g. Redis PING); default: the store's `ping`, else an `inspect`. */
  readonly ping?: () => Promise<unknown>;
  /** Every failed store call (after the timeout/breaker verdict), e.g. for logging. */
  readonly onStoreError?: (op: string, kind: StoreErrorKind, err?: unknown) => void;
}

const finiteOr = (x: number, fallback: number) => (Number.isFinite(x) ? x : fallback);

export class Limiter {
  readonly breaker: CircuitBreaker;
  readonly store: GuardedStore;
  readonly leases: LeasePool;
  private readonly failOpen: FailOpenBuckets;
  private readonly config: LimiterConfig;
  private readonly regionIds: readonly string[];
  private readonly metrics: LimiterMetrics | undefined;
  /** The versions to meet (docs/design.md §3.4): the completed one, then every newer one known. */
  private policySets: readonly PolicySet[];
  /** Monotonic ms after which the policies are not known (a replicated source stopped reading). */
  private policyValidUntil = Number.POSITIVE_INFINITY;
  private readonly clock: () => number;
  private readonly ping: (() => Promise<unknown>) | undefined;
  private readonly receipts: ReceiptSigner;
  private readonly keyHashSecret: string | undefined;

  constructor(deps: LimiterDeps) {
    this.ping = deps.ping;
    this.receipts = new ReceiptSigner(deps.config.refund.secret, deps.config.refund.windowMs * 1000);
    this.keyHashSecret = keyHashSecretOf(deps.config);
    const clock = deps.clock ?? monotonicNow;
    this.config = deps.config;
    this.metrics = deps.metrics;
    this.policySets = [deps.policies];
    this.clock = clock;
    this.regionIds = deps.config.regions.map((r) => r.id);
    this.breaker = new CircuitBreaker(deps.config.breaker, clock);
    this.breaker.onStateChange((s) => {
      this.metrics?.breakerState.set(breakerStateValue(s));
      if (s === "closed") this.failOpen.clear();
    });
    this.store = new GuardedStore(deps.store, this.breaker, {
      timeoutMs: deps.config.redis.timeoutMs,
      onError: (op, kind, err) => {
        this.metrics?.storeErrors.inc({ op, kind });
        deps.onStoreError?.(op, kind, err);
      },
      isMisuse: (err) => err instanceof StoreMisuseError,
    });
    const l = deps.config.leased;
    this.leases = new LeasePool(this.store, {
      batch: l.batch,
      lowWater: l.lowWater,
      durationMs: l.durationMs,
      marginMs: l.marginMs,
      maxKeys: l.maxKeys,
      clock,
    });
    this.failOpen = new FailOpenBuckets(clock, l.maxKeys);
  }

  get region(): string {
    return this.config.region;
  }

  /** The newest policy version this process knows (the target of a rollout). */
  get policies(): PolicySet {
    return this.policySets[this.policySets.length - 1] as PolicySet;
  }

  /** Swaps the policies; subsequent checks use them (several: the meet, `resolveEffective`). */
  setPolicies(next: PolicySet | readonly PolicySet[]): void {
    const sets: readonly PolicySet[] = Array.isArray(next) ? next : [next as PolicySet];
    if (sets.length === 0) throw new RangeError("setPolicies: no policy set");
    this.policySets = sets;
  }

  /**
   * After this monotonic instant the policies are not known: checks are served
   * from tokens already leased to this process, else denied — never fail-open
   * (a replicated source sets it to its last read + limiterStaleMs).
   */
  setPolicyValidUntil(monoMs: number | undefined): void {
    this.policyValidUntil = monoMs ?? Number.POSITIVE_INFINITY;
  }

  private policyUnknown(): boolean {
    return this.clock() > this.policyValidUntil;
  }

  get regions(): readonly string[] {
    return this.regionIds;
  }

  /**
   * Validates the key parts and resolves the policy (by the names as given).
   * Key parts with characters outside [A-Za-z0-9_.-] are stored hashed
   * (`storedKeyPart`); with `keyHashSecret` set, tenants without an explicit
   * policy are hashed too (an unbounded key space); named tenants keep
   * readable keys.
   */
  resolve(tenant: string, resource: string, fieldPrefix = ""): KeyPolicy {
    const max = this.config.keyMaxLength;
    const storedTenant = storedKeyPart(`${fieldPrefix}tenant`, tenant, max, this.keyHashSecret);
    const storedResource = storedKeyPart(`${fieldPrefix}resource`, resource, max, this.keyHashSecret);
    const p = resolveEffective(this.policySets, this.regionIds, this.config.region, tenant, resource, {
      floorPpm: this.config.floorPpm,
    });
    const secret = this.config.keyHashSecret;
    if (secret !== undefined && !this.policies.entries.has(quotaKey(tenant, resource))) {
      return { ...p, tenant: hashKey(secret, tenant), resource: storedResource };
    }
    return { ...p, tenant: storedTenant, resource: storedResource };
  }

  private keyClass(tenant: string, resource: string): string {
    return this.policies.entries.has(quotaKey(tenant, resource)) ? tenant : "default";
  }

  private slice(policy: KeyPolicy): { cap: number; rate: number } {
    return {
      cap: (policy.limit.capacity * policy.baseShare) / SHARE_UNITS,
      rate: (policy.limit.refillPerSecond * policy.baseShare) / SHARE_UNITS,
    };
  }

  private fromDecision(policy: KeyPolicy, d: Decision): CheckResult {
    return {
      allowed: d.allowed,
      limit: d.limit,
      remaining: Math.max(0, finiteOr(d.remaining, 0)),
      scope: "region",
      scopeLimit: (policy.limit.capacity * d.share) / SHARE_UNITS,
      resetSeconds: Math.max(0, finiteOr(d.resetSeconds, 0)),
      // Cost beyond this region's slice: no finite wait is promised; report the full-refill time.
      retryAfterSeconds: Math.max(
        0,
        finiteOr(d.retryAfterSeconds, policy.limit.capacity / policy.limit.refillPerSecond),
      ),
      region: this.config.region,
      degraded: false,
      source: "store",
      policy,
    };
  }

  /** A decision made without the store: from a held lease, fail-open, or a denial. */
  private local(policy: KeyPolicy, allowed: boolean, source: DecisionSource, remaining: number): CheckResult {
    const { cap, rate } = this.slice(policy);
    const degraded = source !== "lease" || this.breaker.state !== "closed";
    const retry = allowed ? 0 : Math.max(1, Math.ceil(this.breaker.msUntilProbe() / 1000));
    // A leased client holds at most lowWater + batch (it prefetches one batch at the low-water mark).
    const l = this.config.leased;
    const held = source === "fail_open" ? cap : l.enabled ? l.batch + l.lowWater : 0;
    const result: CheckResult = {
      allowed,
      limit: policy.limit.capacity,
      remaining,
      scope: "process",
      scopeLimit: Math.max(held, remaining),
      resetSeconds: rate > 0 ? Math.max(0, (cap - remaining) / rate) : 0,
      retryAfterSeconds: retry,
      region: this.config.region,
      degraded,
      source,
      policy,
    };
    return source === "fail_open" ? { ...result, failOpenBound: FailOpenBuckets.bound(policy) } : result;
  }

  private record(r: CheckResult, startedMs: number): CheckResult {
    const m = this.metrics;
    if (m !== undefined) {
      m.decisions.inc({ result: r.allowed ? "allowed" : "denied", source: r.source });
      m.latency.observe({ source: r.source }, (monotonicNow() - startedMs) / 1000);
      m.leasedTokens.set(this.leases.size);
    }
    return r;
  }

  async check(tenant: string, resource: string, cost = 1): Promise<CheckResult> {
    const started = monotonicNow();
    const policy = this.resolve(tenant, resource);
    if (this.policyUnknown()) return this.record(this.degraded(policy, cost, false), started);
    // In-process leases exist for the token bucket only (the window algorithms keep static slices).
    if (this.config.leased.enabled && policy.limit.algorithm === "token_bucket") {
      const client = this.leases.get(policy);
      if (client.tryTake(cost))
        return this.record(this.local(policy, true, "lease", client.available()), started);
    }
    try {
      const d = await this.store.check(policy, cost);
      this.metrics?.share.set({ key_class: this.keyClass(tenant, resource), resource }, d.share);
      const r = this.fromDecision(policy, d);
      return this.record(d.allowed ? this.withReceipt(r, tenant, resource, cost, d.nowUs) : r, started);
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      return this.record(this.degraded(policy, cost), started);
    }
  }

  /** Store unavailable: tokens already leased to this process, then fail-open (if configured) or deny. */
  private degraded(policy: KeyPolicy, cost: number, failOpen = true): CheckResult {
    const client = this.leases.peek(policy);
    if (client?.tryTake(cost))
      return { ...this.local(policy, true, "lease", client.available()), degraded: true };
    if (failOpen && this.config.failMode === "open") {
      const r = this.failOpen.take(policy, cost);
      return this.local(policy, r.allowed, "fail_open", r.remaining);
    }
    return this.local(policy, false, "unavailable", client?.available() ?? 0);
  }

  async checkCompound(items: readonly CompoundItem[]): Promise<CompoundResult> {
    const started = monotonicNow();
    const policies = items.map((i, idx) => this.resolve(i.tenant, i.resource, `limits[${idx}].`));
    if (this.policyUnknown()) return this.degradedCompound(policies, items);
    try {
      const d = await this.store.checkCompound(
        policies.map((policy, i) => ({ policy, cost: items[i]!.cost })),
      );
      const parts = d.parts.map((p, i) => {
        const r = this.fromDecision(policies[i]!, p);
        const it = items[i]!;
        return d.allowed ? this.withReceipt(r, it.tenant, it.resource, it.cost, p.nowUs) : r;
      });
      this.metrics?.decisions.inc(
        { result: d.allowed ? "allowed" : "denied", source: "store" },
        parts.length,
      );
      this.metrics?.latency.observe({ source: "store" }, (monotonicNow() - started) / 1000);
      return { allowed: d.allowed, failedIndex: d.allowed ? -1 : d.failedIndex, parts, degraded: false };
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      return this.degradedCompound(policies, items);
    }
  }

  /**
   * All-or-nothing from held leases: synchronous, so no other check of this
   * process interleaves between the availability test and the takes.
   * Fail-open does not apply to compound checks (deny instead).
   */
  private degradedCompound(policies: readonly KeyPolicy[], items: readonly CompoundItem[]): CompoundResult {
    const clients = policies.map((p) => this.leases.peek(p));
    const failedIndex = clients.findIndex((c, i) => c === undefined || c.available() < items[i]!.cost);
    const allowed = failedIndex === -1;
    if (allowed) {
      for (let i = 0; i < clients.length; i++) clients[i]!.tryTake(items[i]!.cost);
    }
    const parts = policies.map((p, i) => ({
      ...this.local(p, allowed, allowed ? "lease" : "unavailable", clients[i]?.available() ?? 0),
      degraded: true,
    }));
    this.metrics?.decisions.inc(
      { result: allowed ? "allowed" : "denied", source: allowed ? "lease" : "unavailable" },
      parts.length,
    );
    return { allowed, failedIndex, parts, degraded: true };
  }

  private withReceipt(
    r: CheckResult,
    tenant: string,
    resource: string,
    cost: number,
    admittedUs: number,
  ): CheckResult {
    return {
      ...r,
      refundReceipt: this.receipts.issue(this.config.region, tenant, resource, cost, admittedUs),
    };
  }

  /**
   * Gives back `cost` (default: all) of the admission `receipt` names, e.g. the protected
   * call failed (DESIGN §7). Refused (GQ_ERR_RECEIPT_* / GQ_ERR_REFUND_EXCEEDS_RECEIPT) unless
   * this region issued the receipt for this key, cost ≤ its cost, it is within its window,
   * unused, and the region has not lost its state since. 503 codes when the store is unavailable.
   */
  async refund(tenant: string, resource: string, receipt: string, cost?: number): Promise<RefundResult> {
    const c = this.receipts.verify(receipt);
    if (c === undefined) throw new LimiterError("GQ_ERR_RECEIPT_INVALID", undefined, { field: "receipt" });
    if (c.region !== this.config.region) {
      throw new LimiterError(
        "GQ_ERR_RECEIPT_WRONG_REGION",
        `receipt: issued by region ${c.region}; only the region that admitted can refund`,
        { field: "receipt" },
      );
    }
    if (c.tenant !== tenant || c.resource !== resource) {
      throw new LimiterError("GQ_ERR_RECEIPT_WRONG_KEY", `receipt: issued for ${c.tenant}/${c.resource}`, {
        field: "receipt",
      });
    }
    const amount = cost ?? c.cost;
    if (amount > c.cost) {
      throw new LimiterError(
        "GQ_ERR_REFUND_EXCEEDS_RECEIPT",
        `cost: ${amount} is more than the receipt's ${c.cost}`,
        {
          field: "cost",
        },
      );
    }
    const policy = this.resolve(tenant, resource);
    const out = await this.store.refund(policy, amount, {
      id: c.id,
      admittedUs: c.admittedUs,
      expiresUs: c.expiresUs,
    });
    if (!out.refunded) {
      if (out.reason === "used") {
        throw new LimiterError("GQ_ERR_RECEIPT_USED", undefined, { field: "receipt" });
      }
      const why =
        out.reason === "expired"
          ? `receipt: its refund window ended ${((out.nowUs - c.expiresUs) / 1e6).toFixed(3)} s ago`
          : "receipt: the region lost its state after this admission (the bucket it came from is gone)";
      throw new LimiterError("GQ_ERR_RECEIPT_EXPIRED", why, { field: "receipt" });
    }
    return { ...this.fromDecision(policy, out.decision), refunded: amount };
  }

  async inspect(tenant: string, resource: string): Promise<{ policy: KeyPolicy; view: QuotaView }> {
    const policy = this.resolve(tenant, resource);
    return { policy, view: await this.store.inspect(policy) };
  }

  /** Every configured region with its base share under this key's policy. */
  regionShares(tenant: string, resource: string): { id: string; baseShare: number; floorShare: number }[] {
    return this.regionIds.map((id) => {
      const p = resolveEffective(this.policySets, this.regionIds, id, tenant, resource, {
        floorPpm: this.config.floorPpm,
      });
      return { id, baseShare: p.baseShare, floorShare: p.floorShare };
    });
  }

  /** The spec behind a key (for inspection output). */
  spec(tenant: string, resource: string) {
    return lookupPolicy(this.policies, tenant, resource);
  }

  async ready(): Promise<boolean> {
    return this.store.probe(this.resolve("gq-readiness-probe", "gq-readiness-probe"), this.ping);
  }

  /** Returns held leases, then closes the store. */
  async close(): Promise<void> {
    await this.leases.close();
    await this.store.close();
  }
}

export { LimiterError };
