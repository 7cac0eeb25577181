// Envoy's rate limit quota service (RLQS, DESIGN §11, issue 28; mounted by `rls.rlqs`, its
// backend on the region's limiter in rlqs-backend.ts): one bidirectional stream per proxy;
// the first report names the domain; each bucket_id is matched to a policy (or to a blanket
// DENY_ALL / ALLOW_ALL: see RlqsTarget); each new bucket gets an assignment (a token bucket
// and a TTL) that the backend has reserved from the region's slice (lua/assign_reserve.lua: until
// TTL + the delivery margin after the send, fitted to what is free); each ask is sized from the
// proxy's reported demand, its part of the region's share (rlqs-sizing.ts, Fleet); a renewal is
// pushed before each TTL runs out, superseding the assignment it renews (its rate is held once),
// and sooner to a proxy that denies; usage reports go to the backend (they are admissions).
// When the stream closes or the service shuts down every bucket gets abandon_action (the
// reservations stay counted until they expire: a proxy that misses the abandon may still spend
// them).
// The API is Envoy's Go module's (proto/envoy-rlqs-v3.binpb, scripts/gen-rls-descriptor.sh).
import * as grpc from "@grpc/grpc-js";
import { loadServiceApi, type RlsApi, type RlsEntry } from "./protos.js";
import { DemandEstimate, fairAskSize, type RlqsAskSize, type RlqsLimits, wantsMore } from "./rlqs-sizing.js";

export const RLQS_SERVICE = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService";
export const RLQS_DESCRIPTOR_PATH = new URL("../proto/envoy-rlqs-v3.binpb", import.meta.url);

export type RlqsApi = RlsApi;

let cached: RlqsApi | undefined;

/** The wire shapes as the loader decodes / encodes them (snake_case, durations as seconds + nanos). */
export interface RlqsDuration {
  readonly seconds: number;
  readonly nanos: number;
}
/** A map<string, string> as a descriptor set loads it: its entry messages, in wire order. */
export interface RlqsBucketId {
  readonly bucket: readonly RlsEntry[];
}

/** The bucket's entries as a record (a repeated key: the last wins, as protobuf maps do). */
export function bucketEntries(b: RlqsBucketId): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of b.bucket) out[e.key] = e.value;
  return out;
}
export interface RlqsUsage {
  readonly bucket_id: RlqsBucketId | null;
  readonly time_elapsed: RlqsDuration | null;
  readonly num_requests_allowed: number;
  readonly num_requests_denied: number;
}
export interface RlqsReports {
  readonly domain: string;
  readonly bucket_quota_usages: readonly RlqsUsage[];
}
export type RlqsAction =
  | {
      readonly bucket_id: RlqsBucketId;
      readonly quota_assignment_action: {
        readonly assignment_time_to_live: RlqsDuration;
        readonly rate_limit_strategy:
          | { readonly blanket_rule: "ALLOW_ALL" | "DENY_ALL" }
          | {
              readonly token_bucket: {
                readonly max_tokens: number;
                readonly tokens_per_fill: { readonly value: number };
                readonly fill_interval: RlqsDuration;
              };
            };
      };
    }
  | { readonly bucket_id: RlqsBucketId; readonly abandon_action: Record<string, never> };
export interface RlqsResponse {
  readonly bucket_action: readonly RlqsAction[];
}

export function rlqsApi(): RlqsApi {
  cached ??= loadServiceApi(RLQS_DESCRIPTOR_PATH, RLQS_SERVICE);
  return cached;
}

/**
 * What a bucket is limited by: `deny` (DENY_ALL, nothing reserved: an unknown bucket, a zero
 * limit), `allow` (ALLOW_ALL: a rule that states no limit, which bounds nothing), or a key.
 */
export type RlqsTarget =
  | { readonly kind: "deny" }
  | { readonly kind: "allow" }
  | { readonly kind: "policy"; readonly tenant: string; readonly resource: string };
export type RlqsPolicyTarget = Extract<RlqsTarget, { kind: "policy" }>;

/**
 * One reservation (lua/assign_reserve.lua's reply): ttlUs 0 means nothing was reserved. With
 * `blanket` the key needs no reservation (an allow or deny list): that rule is sent instead.
 */
export interface RlqsGrant {
  readonly burst: number;
  readonly rate: number;
  readonly ttlUs: number;
  /** The region's share of the key (ppm) as the reservation saw it: asks are divided from it. */
  readonly shareUnits?: number;
  readonly blanket?: "ALLOW_ALL" | "DENY_ALL";
}

/** What one assignment asks for (sized by rlqs-sizing.ts); the script fits it to what is free. */
export interface RlqsAsk {
  readonly id: string;
  readonly burst: number;
  readonly rate: number;
  /** The assignment of the same bucket on the same stream this one renews (its rate is reused). */
  readonly supersedes?: string;
}

/** The region behind the service (the region's limiter in production, rlqs-backend.ts). */
export interface RlqsBackend {
  /** The policy of a bucket of a domain (matched like RLS descriptors). */
  match(domain: string, bucket: Readonly<Record<string, string>>): RlqsTarget;
  /** The key's limit and the region's base slice (undefined while the policy is unknown). */
  limits(target: RlqsPolicyTarget): RlqsLimits | undefined;
  /** Reserves an assignment for the key, from now until ttl + margin (the script's TIME). */
  reserve(target: RlqsPolicyTarget, ask: RlqsAsk, ttlUs: number, marginUs: number): Promise<RlqsGrant>;
  /** A usage report: admissions and denials of the proxy's local bucket. */
  report(target: RlqsPolicyTarget, allowed: number, denied: number, elapsedUs: number): Promise<void>;
}

export interface RlqsOptions {
  /** TTL asked for each assignment (capped at D and the share schedule by the script). */
  readonly assignmentTtlMs: number;
  /** The delivery margin δ: a reservation lasts TTL + δ after the send (DESIGN §11). */
  readonly deliveryMarginMs: number;
  /** A renewal is sent this long before the TTL of the current assignment runs out. */
  readonly renewBeforeMs: number;
  /** TTL of a DENY_ALL assignment (nothing is reserved for it). */
  readonly denyTtlMs: number;
  /** Buckets per stream (a limit on everything). */
  readonly bucketsPerStreamMax: number;
  /** The part of the region's base slice a bucket's first assignment asks for (no demand known yet). */
  readonly initialFraction: number;
  /** A proxy that denies gets a bigger assignment at once, but not more often than this. */
  readonly minReassignMs: number;
  /**
   * A bucket whose proxy sent no report for this long (or for three of its reporting intervals,
   * if longer) is not renewed: its assignment runs out and its demand leaves the region's split,
   * so a proxy that hangs with its stream open stops holding share. Its next report renews it.
   */
  readonly silentAfterMs: number;
}

export const RLQS_DEFAULTS: RlqsOptions = {
  assignmentTtlMs: 2000,
  deliveryMarginMs: 250,
  renewBeforeMs: 500,
  denyTtlMs: 2000,
  bucketsPerStreamMax: 1000,
  initialFraction: 0.5,
  minReassignMs: 250,
  silentAfterMs: 3000,
};

const duration = (us: number): RlqsDuration => {
  const ns = Math.max(0, Math.round(us * 1000));
  return { seconds: Math.floor(ns / 1e9), nanos: ns % 1e9 };
};
const usOf = (d: RlqsDuration | null): number => (d === null ? 0 : d.seconds * 1e6 + d.nanos / 1000);
const UINT32_MAX = 4_294_967_295;

/** The bucket's identity on a stream: its entries sorted by key. */
export function bucketKey(b: RlqsBucketId): string {
  return JSON.stringify(Object.entries(bucketEntries(b)).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
}

/**
 * A token bucket that admits at most what was reserved: `max_tokens` = the burst (whole
 * tokens), one token per fill every ⌈1/rate⌉ (never faster than the reserved rate).
 */
export function tokenBucketAction(bucketId: RlqsBucketId, g: RlqsGrant): RlqsAction {
  const fillUs = g.rate > 0 ? Math.ceil(1e6 / g.rate) : g.ttlUs + 1;
  return {
    bucket_id: bucketId,
    quota_assignment_action: {
      assignment_time_to_live: duration(g.ttlUs),
      rate_limit_strategy: {
        token_bucket: {
          max_tokens: Math.min(UINT32_MAX, Math.floor(g.burst)),
          tokens_per_fill: { value: 1 },
          fill_interval: duration(fillUs),
        },
      },
    },
  };
}

function blanketAction(bucketId: RlqsBucketId, rule: "ALLOW_ALL" | "DENY_ALL", ttlUs: number): RlqsAction {
  return {
    bucket_id: bucketId,
    quota_assignment_action: {
      assignment_time_to_live: duration(ttlUs),
      rate_limit_strategy: { blanket_rule: rule },
    },
  };
}

type Stream = grpc.ServerDuplexStream<RlqsReports, RlqsResponse>;

interface Bucket {
  readonly id: RlqsBucketId;
  readonly target: RlqsTarget;
  readonly demand: DemandEstimate;
  /** The assignment last sent (a token bucket), for the renewal to supersede. */
  current?:
    | {
        readonly id: string;
        readonly rate: number;
        readonly askedAtMs: number;
        readonly endsAtMs: number;
      }
    | undefined;
  timer?: NodeJS.Timeout | undefined;
  n: number;
  /** When the proxy last reported this bucket (performance.now() ms), and the interval it reported. */
  lastReportAtMs: number;
  reportEveryMs: number;
  /** Not renewed (its proxy went silent): out of the fleet until it reports again. */
  idle: boolean;
  /** Called when a reservation on the key saw the region's share grow (Fleet.noteShare). */
  readonly onShareRise: () => void;
}

/**
 * The region's proxies on each key, across streams: their demand and the region's share as the
 * last reservation saw it, so each ask is its proxy's part of the share (fairAskSize).
 */
class Fleet {
  private readonly byKey = new Map<string, { readonly buckets: Set<Bucket>; shareUnits?: number }>();

  private static keyOf(t: RlqsPolicyTarget): string {
    return `${t.tenant}\u0000${t.resource}`;
  }

  private entry(t: RlqsPolicyTarget) {
    const k = Fleet.keyOf(t);
    let e = this.byKey.get(k);
    if (e === undefined) {
      e = { buckets: new Set() };
      this.byKey.set(k, e);
    }
    return e;
  }

  join(t: RlqsPolicyTarget, b: Bucket): void {
    this.entry(t).buckets.add(b);
  }

  leave(t: RlqsPolicyTarget, b: Bucket): void {
    const k = Fleet.keyOf(t);
    const e = this.byKey.get(k);
    if (e === undefined) return;
    e.buckets.delete(b);
    if (e.buckets.size === 0) this.byKey.delete(k);
  }

  /**
   * The region's share as a reservation saw it. A rise of a tenth or more is pushed to the key's
   * other proxies (each decides whether it wants more): with no report asking, a proxy held back
   * by the old share gets the new one at once, not at its renewal.
   */
  noteShare(t: RlqsPolicyTarget, shareUnits: number, from: Bucket): void {
    const e = this.entry(t);
    const before = e.shareUnits;
    e.shareUnits = shareUnits;
    if (before === undefined || !(shareUnits > before * 1.1)) return;
    for (const b of e.buckets) if (b !== from) b.onShareRise();
  }

  ask(t: RlqsPolicyTarget, b: Bucket, l: RlqsLimits, initialFraction: number): RlqsAskSize {
    const e = this.entry(t);
    let total = 0;
    for (const x of e.buckets) total += x.demand.perSecond ?? 0;
    return fairAskSize(l, b.demand.perSecond, total, e.shareUnits, initialFraction, e.buckets.size);
  }
}

/**
 * A refused reservation is tried again this soon: the region's bucket refills the token a burst
 * needs within its own refill interval, and a proxy without a live assignment is denying meanwhile.
 */
const RLQS_RETRY_MS = 100;

/** One proxy's stream. */
class Session {
  domain: string | undefined;
  readonly buckets = new Map<string, Bucket>();
  closed = false;
  private seq = 0;

  constructor(
    private readonly stream: Stream,
    private readonly backend: RlqsBackend,
    private readonly o: RlqsOptions,
    private readonly streamId: string,
    private readonly onError: (e: unknown) => void,
    private readonly fleet: Fleet,
  ) {}

  async onReports(r: RlqsReports): Promise<void> {
    if (this.domain === undefined) {
      if (r.domain === "") throw new RlqsStreamError("the first usage report names no domain");
      this.domain = r.domain;
    } else if (r.domain !== "" && r.domain !== this.domain) {
      throw new RlqsStreamError(`domain ${JSON.stringify(r.domain)} after ${JSON.stringify(this.domain)}`);
    }
    const fresh = new Set<Bucket>();
    const more = new Set<Bucket>();
    for (const u of r.bucket_quota_usages) {
      if (u.bucket_id === null || u.bucket_id.bucket.length === 0)
        throw new RlqsStreamError("a usage report without a bucket_id");
      const k = bucketKey(u.bucket_id);
      let b = this.buckets.get(k);
      if (b === undefined) {
        if (this.buckets.size >= this.o.bucketsPerStreamMax)
          throw new RlqsStreamError(`more than ${this.o.bucketsPerStreamMax} buckets on one stream`);
        const created: Bucket = {
          id: u.bucket_id,
          target: this.backend.match(this.domain, bucketEntries(u.bucket_id)),
          demand: new DemandEstimate(),
          n: 0,
          lastReportAtMs: performance.now(),
          reportEveryMs: 0,
          idle: false,
          onShareRise: () => this.pushOnShareRise(created),
        };
        b = created;
        this.buckets.set(k, b);
        if (b.target.kind === "policy" && !this.closed) this.fleet.join(b.target, b);
        fresh.add(b);
      }
      const allowed = Number(u.num_requests_allowed);
      const denied = Number(u.num_requests_denied);
      if (!Number.isSafeInteger(allowed) || !Number.isSafeInteger(denied) || allowed < 0 || denied < 0)
        throw new RlqsStreamError(`usage ${allowed} allowed, ${denied} denied: not counts`);
      if (b.target.kind !== "policy") continue;
      const elapsedUs = usOf(u.time_elapsed);
      b.lastReportAtMs = performance.now();
      if (!fresh.has(b)) b.reportEveryMs = elapsedUs / 1000;
      if (b.idle && !this.closed) {
        // A silent proxy reports again: back in the split, and assigned now (its last one ran out).
        b.idle = false;
        b.current = undefined;
        this.fleet.join(b.target, b);
        fresh.add(b);
      }
      // A bucket's first report says when the proxy first needed it, not how fast: its interval
      // began before the bucket existed (a new bucket's demand is unknown until its next one).
      if (!fresh.has(b)) b.demand.observe(allowed + denied, elapsedUs);
      if (allowed > 0 || denied > 0) await this.backend.report(b.target, allowed, denied, elapsedUs);
      if (!fresh.has(b) && !more.has(b) && this.needsMore(b, denied)) more.add(b);
    }
    if (fresh.size > 0 || more.size > 0) await this.assign([...fresh, ...more], more);
  }

  /**
   * The region's share grew (another reservation on the key saw it): a proxy whose ask is now
   * clearly more than it holds gets a bigger assignment at once (at most every minReassignMs).
   */
  private pushOnShareRise(b: Bucket): void {
    if (this.closed || b.idle || b.target.kind !== "policy" || b.current === undefined) return;
    if (performance.now() - b.current.askedAtMs < this.o.minReassignMs) return;
    const l = this.backend.limits(b.target);
    if (l === undefined) return;
    if (!(this.fleet.ask(b.target, b, l, this.o.initialFraction).rate > b.current.rate * 1.1)) return;
    this.assign([b], new Set([b])).catch(this.onError);
  }

  /** A proxy denying with an assignment clearly below its demand gets a bigger one now (a push). */
  private needsMore(b: Bucket, denied: number): boolean {
    if (b.target.kind !== "policy" || b.current === undefined) return false;
    if (performance.now() - b.current.askedAtMs < this.o.minReassignMs) return false;
    const l = this.backend.limits(b.target);
    if (l === undefined) return false;
    return wantsMore(denied, b.current.rate, this.fleet.ask(b.target, b, l, this.o.initialFraction).rate);
  }

  /**
   * Reserves and pushes one assignment per bucket; schedules each renewal. An `early` one (a push
   * to a proxy that needs more, its current assignment still live) is sent only if it is bigger:
   * otherwise the proxy keeps what it has (the unsent reservation stays counted until it ends,
   * and the current one stays backed: the script moved to the new record only the rate the two
   * share).
   */
  private async assign(buckets: readonly Bucket[], early: ReadonlySet<Bucket> = new Set()): Promise<void> {
    const actions: RlqsAction[] = [];
    for (const b of buckets) {
      if (this.closed) return;
      if (b.target.kind !== "policy") {
        const rule = b.target.kind === "deny" ? "DENY_ALL" : "ALLOW_ALL";
        actions.push(blanketAction(b.id, rule, this.o.denyTtlMs * 1000));
        this.schedule(b, this.o.denyTtlMs * 1000);
        continue;
      }
      this.seq += 1;
      b.n += 1;
      const l = this.backend.limits(b.target);
      const size =
        l === undefined ? { rate: 0, burst: 0 } : this.fleet.ask(b.target, b, l, this.o.initialFraction);
      const id = `${this.streamId}.${this.seq}`;
      const g = await this.backend.reserve(
        b.target,
        { id, ...size, ...(b.current !== undefined ? { supersedes: b.current.id } : {}) },
        this.o.assignmentTtlMs * 1000,
        this.o.deliveryMarginMs * 1000,
      );
      if (g.shareUnits !== undefined) this.fleet.noteShare(b.target, g.shareUnits, b);
      if (g.blanket !== undefined) {
        // The key needs no reservation (a list decides it): asked again like any assignment.
        actions.push(blanketAction(b.id, g.blanket, this.o.assignmentTtlMs * 1000));
        this.schedule(b, this.o.assignmentTtlMs * 1000);
        continue;
      }
      if (early.has(b) && b.current !== undefined && (g.ttlUs <= 0 || g.rate <= b.current.rate)) {
        // No more was free: the proxy keeps its assignment, and is not asked for again before
        // minReassignMs (each try is a reservation counted until it ends).
        b.current = { ...b.current, askedAtMs: performance.now() };
        continue;
      }
      if (g.ttlUs <= 0) {
        // Nothing reserved (no share free, or no whole token in the region's bucket for the
        // burst yet). A renewal leaves the proxy its live assignment and is tried again soon;
        // with none live, the proxy denies until the next try (a short DENY_ALL, never allow).
        const leftMs = b.current === undefined ? 0 : b.current.endsAtMs - performance.now();
        if (leftMs > 0) {
          this.retry(b, Math.min(RLQS_RETRY_MS, leftMs));
          continue;
        }
        actions.push(blanketAction(b.id, "DENY_ALL", this.o.renewBeforeMs * 1000));
        this.retry(b, RLQS_RETRY_MS);
        continue;
      }
      actions.push(tokenBucketAction(b.id, g));
      const at = performance.now();
      b.current = { id, rate: g.rate, askedAtMs: at, endsAtMs: at + g.ttlUs / 1000 };
      this.schedule(b, g.ttlUs);
    }
    if (!this.closed && actions.length > 0) this.stream.write({ bucket_action: actions });
  }

  /** The next try of a bucket whose reservation was refused, `ms` from now. */
  private retry(b: Bucket, ms: number): void {
    if (b.timer !== undefined) clearTimeout(b.timer);
    b.timer = setTimeout(() => this.renew(b), Math.max(1, ms));
  }

  private schedule(b: Bucket, ttlUs: number): void {
    if (b.timer !== undefined) clearTimeout(b.timer);
    const ms = Math.max(1, ttlUs / 1000 - this.o.renewBeforeMs);
    b.timer = setTimeout(() => this.renew(b), ms);
  }

  /**
   * A renewal, unless the bucket's proxy went silent (no report for silentAfterMs, or three of
   * its reporting intervals): then nothing is sent, the assignment runs out (the proxy applies
   * its expired-assignment behaviour: deny) and the bucket leaves the fleet, so its share goes to
   * the proxies that report. Its reservation stays counted until it ends: a silent proxy may
   * still be spending it.
   */
  private renew(b: Bucket): void {
    b.timer = undefined;
    if (this.closed) return;
    const silentMs = Math.max(this.o.silentAfterMs, 3 * b.reportEveryMs);
    if (b.target.kind === "policy" && performance.now() - b.lastReportAtMs > silentMs) {
      b.idle = true;
      this.fleet.leave(b.target, b);
      return;
    }
    this.assign([b]).catch(this.onError);
  }

  /** Abandons every bucket (TTL 0), stops renewals; `end`: the server ends the stream. */
  close(end: boolean): void {
    if (this.closed) return;
    this.closed = true;
    const actions: RlqsAction[] = [];
    for (const b of this.buckets.values()) {
      if (b.timer !== undefined) clearTimeout(b.timer);
      if (b.target.kind === "policy" && !b.idle) this.fleet.leave(b.target, b);
      actions.push({ bucket_id: b.id, abandon_action: {} });
    }
    if (end && this.stream.writable) {
      if (actions.length > 0) this.stream.write({ bucket_action: actions });
      this.stream.end();
    }
  }
}

/** A protocol error on one stream: the stream fails with INVALID_ARGUMENT. */
export class RlqsStreamError extends Error {
  override readonly name = "RlqsStreamError";
}

export class RlqsService {
  private readonly sessions = new Set<Session>();
  private readonly fleet = new Fleet();
  private n = 0;
  private readonly o: RlqsOptions;

  constructor(
    private readonly backend: RlqsBackend,
    options: Partial<RlqsOptions> = {},
    private readonly prefix = `${process.pid}.${Date.now()}`,
  ) {
    this.o = { ...RLQS_DEFAULTS, ...options };
    if (!(this.o.renewBeforeMs < this.o.assignmentTtlMs))
      throw new RangeError(`renewBeforeMs ${this.o.renewBeforeMs} must be below assignmentTtlMs`);
    if (!(this.o.deliveryMarginMs >= 0)) throw new RangeError(`deliveryMarginMs ${this.o.deliveryMarginMs}`);
  }

  /** The handlers to add to a grpc.Server beside the RLS. */
  handlers(): grpc.UntypedServiceImplementation {
    return {
      StreamRateLimitQuotas: (stream: Stream) => {
        this.n += 1;
        const fail = (e: unknown) => {
          const invalid = e instanceof RlqsStreamError;
          session.close(false);
          this.sessions.delete(session);
          const details = e instanceof Error ? e.message : String(e);
          stream.emit("error", {
            code: invalid ? grpc.status.INVALID_ARGUMENT : grpc.status.UNAVAILABLE,
            details,
            metadata: new grpc.Metadata(),
          });
        };
        const session = new Session(
          stream,
          this.backend,
          this.o,
          `${this.prefix}.${this.n}`,
          fail,
          this.fleet,
        );
        this.sessions.add(session);
        // Reports of one stream are handled in order, and every report received is counted, also
        // after the stream closed (a closed session only stops assigning): its usage is admissions
        // the oracle sees. The proxy's half-close is handled after the reports before it, so the
        // final report is counted before the buckets are abandoned and the stream ends.
        let chain = Promise.resolve();
        stream.on("data", (r: RlqsReports) => {
          chain = chain.then(() => session.onReports(r)).catch(fail);
        });
        const done = () => {
          session.close(true);
          this.sessions.delete(session);
        };
        stream.on("end", () => {
          chain = chain.then(done);
        });
        stream.on("cancelled", () => {
          session.close(false);
          this.sessions.delete(session);
        });
        stream.on("error", () => {
          session.close(false);
          this.sessions.delete(session);
        });
      },
    };
  }

  /** Shutdown: every stream's buckets abandoned, every stream ended. */
  shutdown(): void {
    for (const s of this.sessions) s.close(true);
    this.sessions.clear();
  }

  get streams(): number {
    return this.sessions.size;
  }
}
