// The decision engine behind the HTTP service and the Fastify plugin: policy
// resolution, key hygiene, the guarded store (timeout + breaker), the leased
// path and the degraded path (fail-closed-to-leases, or explicit fail-open).
import { createHmac } from "node:crypto";
import {
  lookupPolicy,
  type PolicySet,
  quotaKey,
  type RegionConfig,
  type ResolvedKey,
  resolveKey,
  wildcardOf,
} from "@geoquota/config";
import { CircuitBreaker } from "./breaker.js";
import { type MonotonicClock, monotonicNow } from "./clock.js";
import { isStoreUnavailable, LimiterError } from "./errors.js";
import { type FailOpenBound, FailOpenBuckets } from "./fail-open.js";
import { GuardedStore, type StoreErrorKind } from "./guarded-store.js";
import { storedKeyPart } from "./key-hygiene.js";
import { LeasePool } from "./lease-pool.js";
import { leasedHeldBound } from "./leased-client.js";
import { ReceiptSigner } from "./receipts.js";
import {
  breakerStateValue,
  createMetrics,
  type DecisionCell,
  type LimiterMetrics,
  policyLabels,
  type ShareCell,
} from "./metrics.js";
import { Registry } from "prom-client";
import {
  type AssignmentAsk,
  type AssignmentGrant,
  type Decision,
  type KeyPolicy,
  type QuotaView,
  type RegionStore,
  type ResetOutcome,
  SHARE_UNITS,
  StoreMisuseError,
  hashKey,
  keyHashSecretOf,
} from "@geoquota/core";

/**
 * A quota assignment of one key (RLQS, docs/design.md §11): reserved from this region's slice,
 * or a verdict that needs no reservation (an allow or deny list, a shadow policy that never
 * denies, a policy not known yet: nothing reserved, so the proxy denies).
 */
export type AssignmentOutcome =
  | { readonly kind: "reserved"; readonly grant: AssignmentGrant }
  | { readonly kind: "allow_list" | "deny_list" | "shadow" | "policy_unknown" };

/** The parts of a region config the engine reads. */
export type LimiterConfig = Pick<
  RegionConfig,
  "region" | "regions" | "redis" | "breaker" | "failMode" | "leased" | "floorPpm" | "keyMaxLength" | "refund"
> & { readonly keyHashSecret?: string; readonly sharedSecret?: string };

export type DecisionSource =
  | "store"
  | "lease"
  | "fail_open"
  | "unavailable"
  | "allow_list"
  | "deny_list"
  | "policy_unknown";

/**
 * Why a decision is not the key's limit's own: an allow or deny list answered without the
 * store; the policy is unknown (fail closed); or, in a compound check stopped by a deny
 * list, this limit was not evaluated.
 */
export type DecisionReason = "allow_list" | "deny_list" | "policy_unknown" | "not_evaluated";

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
  readonly reason?: DecisionReason;
  /**
   * Shadow policies only: whether the policy would have denied. A shadow decision is never a
   * denial (`allowed` is true); a would-deny charged nothing (the store denied).
   */
  readonly wouldDeny?: boolean;
}

export interface RefundResult extends CheckResult {
  /** Cost given back. */
  readonly refunded: number;
}

export interface CompoundItem {
  readonly tenant: string;
  readonly resource: string;
  readonly cost: number;
  /**
   * What the limit must still hold for the check to pass (default: cost). A check-only
   * limit (the RLS's hits_addend 0) is cost 0, need 1: it charges nothing and denies the
   * whole check when not one unit is left.
   */
  readonly need?: number;
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
  /** The policy versions to meet, oldest first (one set without a rollout; none: unknown yet). */
  readonly policies: PolicySet | readonly PolicySet[];
  /**
   * Where the limiter's metrics (metrics.ts) go: a registry, or `true` for a fresh one of its
   * own; either is `limiter.registry`, which the HTTP app serves at /metrics. Absent or
   * false: none are kept (an embedded engine pays nothing for them).
   */
  readonly metrics?: Registry | boolean;
  readonly clock?: MonotonicClock;
  /** Readiness probe (e.g. Redis PING); default: the store's `ping`, else an `inspect`. */
  readonly ping?: () => Promise<unknown>;
}

/** Told of every failed store call (after the timeout/breaker verdict), e.g. for logging. */
export type StoreErrorListener = (op: string, kind: StoreErrorKind, err?: unknown) => void;

const finiteOr = (x: number, fallback: number) => (Number.isFinite(x) ? x : fallback);
const setsOf = (p: PolicySet | readonly PolicySet[]): readonly PolicySet[] =>
  Array.isArray(p) ? [...(p as readonly PolicySet[])] : [p as PolicySet];

const sameSets = (a: readonly PolicySet[], b: readonly PolicySet[]): boolean =>
  a.length === b.length && a.every((s, i) => s === b[i]);

/** Stands in for a key's policy while no policy set was ever received: admits nothing. */
function noPolicy(tenant: string, resource: string): KeyPolicy {
  return {
    tenant,
    resource,
    limit: { algorithm: "token_bucket", capacity: 0, refillPerSecond: 0 },
    baseShare: 0,
    floorShare: 0,
  };
}

/**
 * A key as one check carries it (issue 27 point 5): its names validated and hashed, its
 * policy met over the versions and its metric labels found once, when the key is first
 * resolved under a policy version set; every step of the check reads this, none resolves
 * the key again.
 */
interface KeyEntry {
  /** The names as given (receipts name them; policies are looked up by them). */
  readonly tenant: string;
  readonly resource: string;
  /** With the stored names; one object per key and version set (the store's argument cache is keyed by it). */
  readonly policy: KeyPolicy;
  /** Undefined while the policy is unknown (fail closed: leases, else deny). */
  readonly resolved: ResolvedKey | undefined;
  /** `key_class` of the share gauge (by the names given) and of the decision counters (by the stored names). */
  readonly shareClass: string;
  readonly decisionClass: string;
  /** This process's last denial of the key (clock ms): see Limiter.denied. */
  deniedAtMs?: number;
  /** The key's metric series, found on its first decision (see Limiter.count). */
  decisionCell?: DecisionCell;
  shareCell?: ShareCell;
}

/** A key resolved under the current policy versions, whether or not they are still known to be current. */
interface ResolvedEntry extends KeyEntry {
  readonly resolved: ResolvedKey;
}

/**
 * A key's `key_class` metric label: its tenant when the newest policies name the key,
 * else "default" (so request bodies never create series).
 */
function keyClassOf(newest: PolicySet, tenant: string, resource: string): string {
  return newest.entries.has(quotaKey(tenant, resource)) ? tenant : "default";
}

/**
 * Keys kept resolved (issue 24): past this many the cache starts again empty, so a
 * stream of one-off keys costs memory bounded by it, never more.
 */
const RESOLVED_KEYS_MAX = 100_000;

/** A key denied again within this long is still the same crossing of the slice (Limiter.denied). */
const WAKE_QUIET_MS = 1000;
/** At most one wake per this long per process, whatever the keys. */
const WAKE_GAP_MS = 50;

export class Limiter {
  readonly breaker: CircuitBreaker;
  readonly store: GuardedStore;
  readonly leases: LeasePool;
  private readonly failOpen: FailOpenBuckets;
  private readonly config: LimiterConfig;
  private readonly regionIds: readonly string[];
  private readonly metrics: LimiterMetrics | undefined;
  /** The registry the metrics are in (undefined: none kept). */
  readonly registry: Registry | undefined;
  private readonly storeErrorListeners = new Set<StoreErrorListener>();
  private policySets: readonly PolicySet[];
  private policyValidUntilMs: number | undefined;
  /** The limiter's monotonic clock (breaker, leases, policy expiry). */
  readonly clock: MonotonicClock;
  /** The last wake (Limiter.denied), clock ms. */
  private wokeAtMs = Number.NEGATIVE_INFINITY;
  private readonly ping: (() => Promise<unknown>) | undefined;
  private readonly receipts: ReceiptSigner;
  private readonly keyHashSecret: string | undefined;
  /** HMAC key of the headers' hashed `pk` (headers.ts): the same in every region, never the key hash's own. */
  readonly partitionKeySecret: string;
  /**
   * Each key resolved once per policy version set (emptied by setPolicies when the sets change): the same
   * KeyPolicy object for every check of a key, so the store's per-policy script-argument
   * cache hits and the names are validated and hashed once, not per check.
   */
  private readonly resolvedKeys = new Map<string, ResolvedEntry>();

  constructor(deps: LimiterDeps) {
    this.ping = deps.ping;
    this.receipts = new ReceiptSigner(deps.config.refund.secret, deps.config.refund.windowMs * 1000);
    this.keyHashSecret = keyHashSecretOf(deps.config);
    this.partitionKeySecret = createHmac("sha256", this.keyHashSecret ?? deps.config.refund.secret)
      .update("geoquota partition key v1")
      .digest("hex");
    const clock = deps.clock ?? monotonicNow;
    this.clock = clock;
    this.config = deps.config;
    this.policySets = setsOf(deps.policies);
    const m = deps.metrics;
    this.registry = m === true ? new Registry() : m === false ? undefined : m;
    // Labels follow this limiter's newest policies (read at each use: setPolicies moves them).
    this.metrics =
      this.registry === undefined
        ? undefined
        : createMetrics(this.registry, {
            ...policyLabels(() => this.newestPolicies),
            breakerState: () => this.breaker.state,
            leasedKeys: () => this.leases.size,
          });
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
        for (const l of this.storeErrorListeners) l(op, kind, err);
      },
      isMisuse: (err) => err instanceof StoreMisuseError,
      // A failure too few to open the breaker still starts fail-open buckets: they must not
      // live on (refilling) into the next outage, which would then open with a burst.
      onRecovered: () => this.failOpen.clear(),
    });
    const l = deps.config.leased;
    this.leases = new LeasePool(this.store, {
      batch: l.batch,
      lowWater: l.lowWater,
      maxBatch: l.maxBatch,
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

  /** The longest tenant or resource a check takes (config `keyMaxLength`). */
  get keyMaxLength(): number {
    return this.config.keyMaxLength;
  }

  /** Calls `listener` on every failed store call; returns the function that stops it. */
  onStoreError(listener: StoreErrorListener): () => void {
    this.storeErrorListeners.add(listener);
    return () => this.storeErrorListeners.delete(listener);
  }

  /** The newest policy set, or undefined before the first (metrics labels; never throws). */
  get newestPolicies(): PolicySet | undefined {
    return this.policySets[this.policySets.length - 1];
  }

  /** The newest policy set (GQ_ERR_POLICY_UNKNOWN before the first). */
  get policies(): PolicySet {
    const newest = this.policySets[this.policySets.length - 1];
    if (newest === undefined) throw new LimiterError("GQ_ERR_POLICY_UNKNOWN");
    return newest;
  }

  /** The policy versions this limiter meets, oldest first. */
  get policyVersions(): readonly PolicySet[] {
    return this.policySets;
  }

  /**
   * Swaps the policy set, or the versions to meet during a rollout (oldest first; see
   * resolveKey in @geoquota/config); subsequent checks use them.
   */
  setPolicies(next: PolicySet | readonly PolicySet[]): void {
    const sets = setsOf(next);
    // A policy set is never changed in place (a new version is a new object), so the same
    // sets again change nothing: the replicated source hands them over on every read (4 a
    // second), and emptying the resolved keys each time would re-resolve every hot key and
    // give the store and the lease pool new KeyPolicy objects (cache misses) four times a second.
    if (sameSets(sets, this.policySets)) return;
    this.policySets = sets;
    this.resolvedKeys.clear();
  }

  /**
   * The limiter's monotonic instant after which its policy is unknown (the replicated source
   * was not read in time); undefined: no expiry. Past it, or before any set, checks fail
   * closed: tokens already leased to this process, else denied (`policy_unknown`), never
   * fail-open; refunds answer GQ_ERR_POLICY_UNKNOWN.
   */
  setPolicyValidUntil(monoMs: number | undefined): void {
    this.policyValidUntilMs = monoMs;
  }

  /** Whether checks are decided under a known policy (see setPolicyValidUntil). */
  get policyKnown(): boolean {
    return (
      this.policySets.length > 0 &&
      (this.policyValidUntilMs === undefined || this.clock() <= this.policyValidUntilMs)
    );
  }

  get regions(): readonly string[] {
    return this.regionIds;
  }

  /**
   * Validates the key parts and resolves the policy (by the names as given).
   * Key parts with characters outside [A-Za-z0-9_.-] are stored hashed
   * (`storedKeyPart`); with `keyHashSecret` set, tenants without an explicit
   * policy (in the newest version) are hashed too (an unbounded key space);
   * named tenants keep readable keys. GQ_ERR_POLICY_UNKNOWN before any policy set.
   */
  resolve(tenant: string, resource: string, fieldPrefix = ""): KeyPolicy {
    const k = this.keyState(tenant, resource, fieldPrefix);
    if (k.resolved === undefined && this.policySets.length === 0) {
      throw new LimiterError("GQ_ERR_POLICY_UNKNOWN");
    }
    return k.policy;
  }

  /**
   * The key's stored names, its meet over the policy versions, and its list/shadow verdict;
   * `resolved` is withheld while the policy is unknown (checked on every call: it expires).
   */
  private keyState(tenant: string, resource: string, fieldPrefix = ""): KeyEntry {
    const id = `${tenant}\u0000${resource}`;
    let e = this.resolvedKeys.get(id);
    if (e === undefined) {
      const fresh = this.resolveFresh(tenant, resource, fieldPrefix);
      if (fresh.resolved === undefined) return fresh;
      e = fresh as ResolvedEntry;
      if (this.resolvedKeys.size >= RESOLVED_KEYS_MAX) this.resolvedKeys.clear();
      this.resolvedKeys.set(id, e);
    }
    return this.policyKnown ? e : { ...e, resolved: undefined };
  }

  /** keyState without the cache (validates and hashes the names; `resolved` undefined before any set). */
  private resolveFresh(tenant: string, resource: string, fieldPrefix: string): KeyEntry {
    const max = this.config.keyMaxLength;
    const storedTenant = storedKeyPart(`${fieldPrefix}tenant`, tenant, max, this.keyHashSecret);
    const storedResource = storedKeyPart(`${fieldPrefix}resource`, resource, max, this.keyHashSecret);
    const newest = this.policySets[this.policySets.length - 1];
    if (newest === undefined) {
      const policy = noPolicy(storedTenant, storedResource);
      return {
        tenant,
        resource,
        policy,
        resolved: undefined,
        shareClass: "default",
        decisionClass: "default",
      };
    }
    const secret = this.config.keyHashSecret;
    // A key a policy, an override or a wildcard override names keeps a readable tenant.
    const k = quotaKey(tenant, resource);
    const named =
      newest.entries.has(k) ||
      newest.overrides?.has(k) === true ||
      wildcardOf(newest, storedTenant, storedResource) !== undefined;
    const finalTenant = secret !== undefined && !named ? hashKey(secret, tenant) : storedTenant;
    // Policies are looked up by the names given; wildcards match the stored names, which is all
    // the gossip daemon knows of the key (docs/design.md §7): both land on the same policy.
    const r = resolveKey(this.policySets, this.regionIds, this.config.region, tenant, resource, {
      floorPpm: this.config.floorPpm,
      names: { stored: { tenant: finalTenant, resource: storedResource } },
    });
    const policy = { ...r.policy, tenant: finalTenant, resource: storedResource };
    return {
      tenant,
      resource,
      policy,
      resolved: r,
      shareClass: keyClassOf(newest, tenant, resource),
      decisionClass: keyClassOf(newest, finalTenant, storedResource),
    };
  }

  private slice(policy: KeyPolicy): { cap: number; rate: number } {
    return {
      cap: (policy.limit.capacity * policy.baseShare) / SHARE_UNITS,
      rate: (policy.limit.refillPerSecond * policy.baseShare) / SHARE_UNITS,
    };
  }

  /**
   * The store's decision as the engine reports it; `refundReceipt` set on an admission that has
   * one, signed when first read: the receipt's HMAC-SHA256 was a quarter of `Limiter.check`'s
   * Node CPU (≈ 4 µs of 18 with its encoding), which the HTTP route pays for every admission (its
   * body carries the receipt) but RLS and library callers that never refund need not.
   */
  private fromDecision(policy: KeyPolicy, d: Decision, refundReceipt?: () => string): CheckResult {
    const r: CheckResult = {
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
    // One object per decision, the receipt an enumerable property of it (a spread or JSON copy
    // reads it, so signs it then), the same string on every read.
    if (refundReceipt !== undefined) {
      let signed: string | undefined;
      Object.defineProperty(r, "refundReceipt", {
        enumerable: true,
        configurable: true,
        get: () => (signed ??= refundReceipt()),
      });
    }
    return r;
  }

  /** A decision made without the store: from a held lease, fail-open, or a denial. */
  private local(policy: KeyPolicy, allowed: boolean, source: DecisionSource, remaining: number): CheckResult {
    const { cap, rate } = this.slice(policy);
    const degraded = source !== "lease" || this.breaker.state !== "closed";
    const retry = allowed ? 0 : Math.max(1, Math.ceil(this.breaker.msUntilProbe() / 1000));
    // What one leased client may hold (leasedHeldBound: 2·maxBatch + lowWater with the default
    // rate sizing, batch + lowWater for a fixed batch), and never more than C: its leases are
    // counted in the region's bucket (leased + bucket ≤ C·s/U ≤ C), and the pool replaces the
    // client when the policy changes.
    const l = this.config.leased;
    const held =
      source === "fail_open" ? cap : l.enabled ? Math.min(leasedHeldBound(l), policy.limit.capacity) : 0;
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
    if (source === "policy_unknown") return { ...result, reason: "policy_unknown" };
    return source === "fail_open" ? { ...result, failOpenBound: FailOpenBuckets.bound(policy) } : result;
  }

  /** A decision by an allow or deny list, made without the store. */
  private listed(policy: KeyPolicy, reason: "allow_list" | "deny_list" | "not_evaluated"): CheckResult {
    const { cap } = this.slice(policy);
    const allowed = reason === "allow_list";
    return {
      allowed,
      limit: policy.limit.capacity,
      // Not limited: the slice, untouched; denied: nothing.
      remaining: allowed ? cap : 0,
      scope: "region",
      scopeLimit: cap,
      resetSeconds: 0,
      retryAfterSeconds: 0,
      region: this.config.region,
      degraded: false,
      source: allowed ? "allow_list" : "deny_list",
      policy,
      reason,
    };
  }

  /** Shadow policy: the decision as computed, reported, never a denial. */
  private shadowed(r: CheckResult): CheckResult {
    if (r.allowed) return { ...r, wouldDeny: false };
    return { ...r, allowed: true, retryAfterSeconds: 0, wouldDeny: true };
  }

  private count(r: CheckResult, allowed: boolean, key: KeyEntry): void {
    const m = this.metrics;
    if (m === undefined) return;
    m.decisions.inc({ result: allowed ? "allowed" : "denied", source: r.source });
    // The key's series, kept with the key: a check adds one to a number (the scrape reads it).
    let cell = key.decisionCell;
    if (cell?.live !== true) {
      cell = m.keyDecisions.cell(key.decisionClass, key.policy.resource);
      key.decisionCell = cell;
    }
    if (allowed) cell.allowed++;
    else cell.denied++;
    if (r.wouldDeny !== undefined) {
      m.shadowDecisions.inc({ result: r.wouldDeny ? "would_deny" : "allowed", source: r.source });
    }
  }

  private record(r: CheckResult, key: KeyEntry, startedMs: number): CheckResult {
    const m = this.metrics;
    if (m !== undefined) {
      this.count(r, r.allowed, key);
      m.latency.observe({ source: r.source }, (monotonicNow() - startedMs) / 1000);
    }
    return r;
  }

  async check(tenant: string, resource: string, cost = 1): Promise<CheckResult> {
    // Check only (issue 22, as the RLS's hits_addend 0): counts nothing and is
    // allowed while one unit is left; one check-only item of the compound script.
    if (cost === 0) return (await this.checkCompound([{ tenant, resource, cost: 0, need: 1 }])).parts[0]!;
    const started = monotonicNow();
    const key = this.keyState(tenant, resource);
    const { policy, resolved } = key;
    if (resolved === undefined) return this.record(this.unknownPolicy(policy, cost), key, started);
    if (resolved.access === "deny") return this.record(this.listed(policy, "deny_list"), key, started);
    if (resolved.access === "allow") return this.record(this.listed(policy, "allow_list"), key, started);
    const r = await this.limit(key, cost);
    return this.record(resolved.shadow ? this.shadowed(r) : r, key, started);
  }

  /** The key's limit: tokens leased to this process, else the store, else the degraded path. */
  private async limit(key: KeyEntry, cost: number): Promise<CheckResult> {
    const { policy } = key;
    // In-process leases exist for the token bucket only (the window algorithms keep static slices).
    if (this.config.leased.enabled && policy.limit.algorithm === "token_bucket") {
      const client = this.leases.get(policy);
      if (client.tryTake(cost)) return this.local(policy, true, "lease", client.available());
    }
    try {
      const d = await this.store.check(policy, cost);
      if (!d.allowed) this.denied(key);
      const m = this.metrics;
      if (m !== undefined) {
        let cell = key.shareCell;
        if (cell?.live !== true) {
          cell = m.share.cell(key.shareClass, key.resource);
          key.shareCell = cell;
        }
        cell.sharePpm = d.share;
      }
      const receipt = d.allowed ? this.receipt(key.tenant, key.resource, cost, d.nowUs) : undefined;
      return this.fromDecision(policy, d, receipt);
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      return this.degraded(policy, cost);
    }
  }

  /**
   * A denial by the store after WAKE_QUIET_MS without one for the key: its demand just crossed
   * the region's slice, so the region's gossip daemon is woken for an early round (DESIGN §3
   * "Demand, targets and lending"; RegionStore.wake) instead of noticing at its timer's round.
   * A key denied on and on wakes nothing more; the process wakes at most every WAKE_GAP_MS.
   * Only the rate algorithms follow demand (the window algorithms keep static slices).
   */
  private denied(key: KeyEntry): void {
    const algorithm = key.policy.limit.algorithm;
    if (algorithm !== "token_bucket" && algorithm !== "gcra") return;
    const now = this.clock();
    const quiet = key.deniedAtMs === undefined || now - key.deniedAtMs >= WAKE_QUIET_MS;
    key.deniedAtMs = now;
    if (!quiet || now - this.wokeAtMs < WAKE_GAP_MS) return;
    this.wokeAtMs = now;
    this.store.wake?.();
  }

  /** Store unavailable: tokens already leased to this process, then fail-open (if configured) or deny. */
  private degraded(policy: KeyPolicy, cost: number): CheckResult {
    const client = this.leases.peek(policy);
    if (client?.tryTake(cost))
      return { ...this.local(policy, true, "lease", client.available()), degraded: true };
    if (this.config.failMode === "open") {
      const r = this.failOpen.take(policy, cost);
      return this.local(policy, r.allowed, "fail_open", r.remaining);
    }
    return this.local(policy, false, "unavailable", client?.available() ?? 0);
  }

  /** Policy unknown: as an unavailable store without fail-open (held leases, else deny); lists and shadow unknown too. */
  private unknownPolicy(policy: KeyPolicy, cost: number): CheckResult {
    const client = this.leases.peek(policy);
    if (client?.tryTake(cost))
      return { ...this.local(policy, true, "lease", client.available()), degraded: true };
    return this.local(policy, false, "policy_unknown", client?.available() ?? 0);
  }

  /**
   * All or nothing over the limits that apply: a deny-listed limit denies the whole check
   * without the store (the others `not_evaluated`); allow-listed limits are left out of the
   * store call; a shadow limit never denies (a shadow limit that would deny is left out and
   * the rest decided again, at most once per shadow limit).
   */
  async checkCompound(items: readonly CompoundItem[]): Promise<CompoundResult> {
    const started = monotonicNow();
    const keys = items.map((i, idx) => this.keyState(i.tenant, i.resource, `limits[${idx}].`));
    const policies = keys.map((k) => k.policy);
    const resolved = keys.map((k) => k.resolved);
    if (!resolved.every((r): r is ResolvedKey => r !== undefined)) {
      return this.recordCompound(this.degradedCompound(keys, items, true), keys);
    }
    const denyAt = resolved.findIndex((r) => r.access === "deny");
    if (denyAt >= 0) {
      const parts = resolved.map((r, i) =>
        this.listed(
          policies[i]!,
          r.access === "deny" ? "deny_list" : r.access === "allow" ? "allow_list" : "not_evaluated",
        ),
      );
      return this.recordCompound(
        { allowed: false, failedIndex: denyAt, parts, degraded: false },
        keys,
        started,
      );
    }
    const parts: (CheckResult | undefined)[] = resolved.map((r, i) =>
      r.access === "allow" ? this.listed(policies[i]!, "allow_list") : undefined,
    );
    let active = resolved.flatMap((r, i) => (r.access === "limit" ? [i] : []));
    try {
      while (active.length > 0) {
        const d = await this.store.checkCompound(
          active.map((i) => {
            const { cost, need } = items[i]!;
            return need === undefined ? { policy: policies[i]!, cost } : { policy: policies[i]!, cost, need };
          }),
        );
        const failed = d.allowed ? undefined : active[d.failedIndex];
        if (failed !== undefined && resolved[failed]!.shadow) {
          parts[failed] = this.shadowed(this.fromDecision(policies[failed]!, d.parts[d.failedIndex]!));
          active = active.filter((i) => i !== failed);
          continue;
        }
        active.forEach((i, j) => {
          const p = d.parts[j]!;
          const it = items[i]!;
          // A check-only part (cost 0) admitted nothing: no receipt to refund.
          const receipt =
            d.allowed && it.cost > 0 ? this.receipt(it.tenant, it.resource, it.cost, p.nowUs) : undefined;
          const part = this.fromDecision(policies[i]!, p, receipt);
          parts[i] = resolved[i]!.shadow ? this.shadowed(part) : part;
        });
        const result = { allowed: d.allowed, failedIndex: failed ?? -1, parts: parts as CheckResult[] };
        return this.recordCompound({ ...result, degraded: false }, keys, started);
      }
      // Nothing left to charge: allow-listed, or shadow limits that would deny.
      return this.recordCompound(
        { allowed: true, failedIndex: -1, parts: parts as CheckResult[], degraded: false },
        keys,
        started,
      );
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      return this.recordCompound(this.degradedCompound(keys, items, false), keys);
    }
  }

  /** Metrics of a compound check: one decision per part, with the check's result. */
  private recordCompound(r: CompoundResult, keys: readonly KeyEntry[], startedMs?: number): CompoundResult {
    r.parts.forEach((p, i) => {
      this.count(p, r.allowed, keys[i]!);
    });
    if (startedMs !== undefined) {
      const source = r.parts.some((p) => p.source === "store") ? "store" : (r.parts[0]?.source ?? "store");
      this.metrics?.latency.observe({ source }, (monotonicNow() - startedMs) / 1000);
    }
    return r;
  }

  /**
   * All-or-nothing from held leases: synchronous, so no other check of this
   * process interleaves between the availability test and the takes.
   * Fail-open does not apply to compound checks (deny instead). With the policy
   * unknown every part is enforced (lists and shadow are not known either).
   */
  private degradedCompound(
    keys: readonly KeyEntry[],
    items: readonly CompoundItem[],
    unknown: boolean,
  ): CompoundResult {
    const mode = keys.map((k) =>
      unknown || k.resolved === undefined
        ? "enforce"
        : k.resolved.access === "allow"
          ? "allow"
          : k.resolved.shadow
            ? "shadow"
            : "enforce",
    );
    const clients = keys.map((k, i) => (mode[i] === "allow" ? undefined : this.leases.peek(k.policy)));
    const covers = (i: number) =>
      (clients[i]?.available() ?? 0) >= Math.max(items[i]!.cost, items[i]!.need ?? items[i]!.cost);
    const failedIndex = mode.findIndex((m, i) => m === "enforce" && !covers(i));
    const allowed = failedIndex === -1;
    const deniedBy: DecisionSource = unknown ? "policy_unknown" : "unavailable";
    const parts = keys.map((k, i) => {
      if (mode[i] === "allow") return this.listed(k.policy, "allow_list");
      const take = allowed && covers(i);
      if (take) clients[i]!.tryTake(items[i]!.cost);
      const r = {
        ...this.local(k.policy, take, take ? "lease" : deniedBy, clients[i]?.available() ?? 0),
        degraded: true,
      };
      return mode[i] === "shadow" ? this.shadowed(r) : r;
    });
    return { allowed, failedIndex, parts, degraded: true };
  }

  /** Signs the receipt of an admission when called (fromDecision calls it on the first read). */
  private receipt(tenant: string, resource: string, cost: number, admittedUs: number): () => string {
    return () => this.receipts.issue(this.config.region, tenant, resource, cost, admittedUs);
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
    // A refund grows the bucket: not under a policy this limiter does not know is current.
    if (!this.policyKnown) throw new LimiterError("GQ_ERR_POLICY_UNKNOWN");
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

  /**
   * Reserves a quota assignment of the key (RLQS, docs/design.md §11): up to `burst` whole tokens
   * and `rate` tokens/s, from now until ttl + margin; the script reserves the largest assignment
   * the slice backs (rate first, then burst) and cuts its TTL to the share schedule. `supersedes`
   * names the live assignment of the same stream and bucket this one renews (their rates do not
   * add). Store errors are thrown.
   */
  async reserveAssignment(tenant: string, resource: string, ask: AssignmentAsk): Promise<AssignmentOutcome> {
    const { policy, resolved } = this.keyState(tenant, resource);
    if (resolved === undefined) return { kind: "policy_unknown" };
    if (resolved.access !== "limit") return { kind: resolved.access === "deny" ? "deny_list" : "allow_list" };
    if (resolved.shadow) return { kind: "shadow" };
    const grant = await this.store.reserveAssignment(policy, ask);
    return { kind: "reserved", grant };
  }

  /**
   * A proxy's usage report of the key counted as admissions and denials (RLQS): nothing is taken
   * from the bucket (the assignment was). Keys no limit applies to count nothing, as checks.
   */
  async countUsage(tenant: string, resource: string, allowed: number, denied: number): Promise<void> {
    const { policy, resolved } = this.keyState(tenant, resource);
    if (resolved === undefined || resolved.access !== "limit" || resolved.shadow) return;
    if (allowed === 0 && denied === 0) return;
    await this.store.countUsage(policy, allowed, denied);
  }

  async inspect(tenant: string, resource: string): Promise<{ policy: KeyPolicy; view: QuotaView }> {
    const policy = this.resolve(tenant, resource);
    return { policy, view: await this.store.inspect(policy) };
  }

  /**
   * Restarts the key's state in this region empty (docs/design.md §3.4 "Resetting a key"):
   * never full, so the global bound holds. Fails like a refund while the policy is unknown.
   */
  async reset(tenant: string, resource: string): Promise<ResetOutcome & { readonly policy: KeyPolicy }> {
    if (!this.policyKnown) throw new LimiterError("GQ_ERR_POLICY_UNKNOWN");
    const policy = this.resolve(tenant, resource);
    return { ...(await this.store.reset(policy)), policy };
  }

  /** Every configured region with its base share under this key's policy (the meet over versions). */
  regionShares(tenant: string, resource: string): { id: string; baseShare: number; floorShare: number }[] {
    if (this.policySets.length === 0) throw new LimiterError("GQ_ERR_POLICY_UNKNOWN");
    const stored = this.keyState(tenant, resource).policy;
    return this.regionIds.map((id) => {
      const p = resolveKey(this.policySets, this.regionIds, id, tenant, resource, {
        floorPpm: this.config.floorPpm,
        names: { stored: { tenant: stored.tenant, resource: stored.resource } },
      }).policy;
      return { id, baseShare: p.baseShare, floorShare: p.floorShare };
    });
  }

  /**
   * The spec behind a key (for inspection output): the newest version's, with the limit this
   * region enforces during a rollout, plus `access` when a list decides and `shadow` when set.
   */
  spec(tenant: string, resource: string) {
    const stored = this.keyState(tenant, resource).policy;
    const names = { stored: { tenant: stored.tenant, resource: stored.resource } };
    const newest = lookupPolicy(this.policies, tenant, resource, names);
    const r = resolveKey(this.policySets, this.regionIds, this.config.region, tenant, resource, {
      floorPpm: this.config.floorPpm,
      names,
    });
    const { shadow: _newestShadow, ...rest } = newest;
    return {
      ...rest,
      ...r.policy.limit,
      ...(r.shadow ? { shadow: true } : {}),
      ...(r.access !== "limit" ? { access: r.access } : {}),
    };
  }

  async ready(): Promise<boolean> {
    return this.store.probe(this.keyState("gq-readiness-probe", "gq-readiness-probe").policy, this.ping);
  }

  /** Returns held leases, then closes the store. */
  async close(): Promise<void> {
    await this.leases.close();
    await this.store.close();
  }
}

export { LimiterError };
