// ShouldRateLimit (DESIGN §11): one more front door to the region's check.
// Descriptors become limits (the envoyproxy/ratelimit rules, a descriptor's own
// `limit` override, or the policies file through the native domain), all of
// one request decided by one compound check — atomically, all or nothing —
// with per-descriptor costs from hits_addend. Errors are gRPC status errors,
// never `overall_code: UNKNOWN` (Envoy reads UNKNOWN as OK).
import { createHash } from "node:crypto";
import { keyLimitResource, type LimitSpec, type RlsAlgorithm, type RlsUnit } from "@geoquota/config";
import { type CheckResult, type CompoundResult, type Limiter, LimiterError } from "@geoquota/limiter";
import { type CompoundItem, rateLimitHeaders } from "@geoquota/limiter/internal";
import { type EnvoyUnit, UNIT_SECONDS } from "./envoy-config.js";
import type { RlsDescriptor, RlsRateLimit, RlsRequest, RlsResponse, RlsStatus } from "./protos.js";
import type { RuleSet } from "./rules.js";
import { counterIdOf } from "./rules.js";

export type RlsErrorCode = "INVALID_ARGUMENT" | "UNAVAILABLE";

/** A request the service cannot answer with a decision: sent to the client as a gRPC status. */
export class RlsError extends Error {
  override readonly name = "RlsError";
  constructor(
    readonly code: RlsErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface RlsOptions {
  /** fixed_window: envoyproxy/ratelimit's counting; token_bucket: geoquota's bucket (opt-in). */
  readonly algorithm: "fixed_window" | "token_bucket";
  /** Token bucket capacity (default requests_per_unit). */
  readonly burst?: number;
  /** The domain whose descriptors (`tenant`, `resource`) name keys of the policies file. */
  readonly nativeDomain?: string;
}

/** Largest cost one descriptor may ask (a uint64 on the wire; integers beyond 2^53 lose precision). */
export const RLS_COST_MAX = 1_000_000_000;
const UINT32_MAX = 4_294_967_295;
const HEADER_NAMES = ["ratelimit-policy", "ratelimit", "retry-after"] as const;

/** What a descriptor is limited by (RlsService.targetOf). */
export type RlsTarget =
  | { readonly kind: "none" }
  | { readonly kind: "unlimited"; readonly name: string; readonly replaces: readonly string[] }
  | {
      readonly kind: "key";
      readonly tenant: string;
      readonly resource: string;
      /** From a rule or an override; undefined: the policies file decides (native domain). */
      readonly current?: RlsRateLimit;
      readonly name: string;
      readonly replaces: readonly string[];
      /** requests_per_unit 0: every hit is over (never reaches the store). */
      readonly zero: boolean;
      readonly shadow: boolean;
      readonly quota: boolean;
    };

const NONE: RlsTarget = { kind: "none" };
const UNIT_CODES: Readonly<Record<EnvoyUnit, RlsUnit>> = {
  SECOND: "second",
  MINUTE: "minute",
  HOUR: "hour",
  DAY: "day",
  MONTH: "month",
  YEAR: "year",
};
const ID_SAFE = /^[A-Za-z0-9_.-]{1,96}$/;

/** The tenant of a domain's counters: one per domain, so one request's keys share a shard (Redis Cluster). */
export function domainTenant(domain: string): string {
  return ID_SAFE.test(domain)
    ? domain
    : `rlsd.${createHash("sha256").update(domain).digest("hex").slice(0, 32)}`;
}

const clampU32 = (x: number) => Math.max(0, Math.min(UINT32_MAX, Math.floor(Number.isFinite(x) ? x : 0)));

/** A unit and whole requests per unit describing a policy of the policies file (native domain). */
function currentOfSpec(name: string, limit: LimitSpec): RlsRateLimit {
  const units = Object.entries(UNIT_SECONDS) as [EnvoyUnit, number][];
  if (limit.windowMs !== undefined) {
    const exact = units.find(([, s]) => s * 1000 === limit.windowMs);
    if (exact !== undefined) return { name, requests_per_unit: clampU32(limit.capacity), unit: exact[0] };
  }
  // The sustained rate in the smallest unit where it is at least one whole request.
  const [unit, seconds] = units.find(([, s]) => limit.refillPerSecond * s >= 1) ?? units[units.length - 1]!;
  return { name, requests_per_unit: clampU32(limit.refillPerSecond * seconds), unit };
}

export class RlsService {
  private readonly algorithm: RlsAlgorithm;

  constructor(
    private readonly limiter: Limiter,
    private readonly rules: RuleSet,
    private readonly options: RlsOptions,
  ) {
    this.algorithm = options.algorithm === "token_bucket" ? "tb" : "fw";
  }

  private keyOf(id: string, requestsPerUnit: number, unit: EnvoyUnit, shadow: boolean): string {
    return keyLimitResource(
      {
        algorithm: this.algorithm,
        requestsPerUnit,
        unit: UNIT_CODES[unit],
        ...(this.algorithm === "tb" && this.options.burst !== undefined ? { burst: this.options.burst } : {}),
        ...(shadow ? { shadow: true } : {}),
      },
      id,
    );
  }

  /**
   * The limit a descriptor names: an envoyproxy/ratelimit rule, its own `limit` override, or a
   * key of the policies file through the native domain; `none` when nothing applies (the RLQS
   * matches a bucket_id with this too).
   */
  targetOf(domain: string, d: RlsDescriptor, index: number): RlsTarget {
    const known = this.rules.hasDomain(domain) || domain === this.options.nativeDomain;
    // As envoyproxy/ratelimit: an unknown domain has no limits, overrides included.
    if (!known) return NONE;
    if (d.limit !== null && d.limit !== undefined) {
      const unit = d.limit.unit as EnvoyUnit;
      if (!(unit in UNIT_SECONDS)) {
        throw new RlsError(
          "INVALID_ARGUMENT",
          `descriptors[${index}].limit.unit: ${d.limit.unit} is not a unit (SECOND…YEAR)`,
        );
      }
      const rpu = d.limit.requests_per_unit;
      const id = counterIdOf(
        domain,
        d.entries.map((e) => [e.key, e.value] as const),
      );
      const current = { name: "", requests_per_unit: rpu, unit };
      return {
        kind: "key",
        tenant: domainTenant(domain),
        resource: rpu > 0 ? this.keyOf(id, rpu, unit, false) : `rls-zero.${id}`,
        current,
        name: "",
        replaces: [],
        zero: rpu === 0,
        shadow: false,
        quota: false,
      };
    }
    if (this.rules.hasDomain(domain)) {
      const m = this.rules.match(domain, d.entries);
      if (m.kind === "none") return NONE;
      const l = m.limit;
      if (l.unlimited) return { kind: "unlimited", name: l.name, replaces: l.replaces };
      return {
        kind: "key",
        tenant: domainTenant(domain),
        resource:
          l.requestsPerUnit > 0
            ? this.keyOf(m.counterId, l.requestsPerUnit, l.unit, l.shadow || l.quota)
            : `rls-zero.${m.counterId}`,
        current: { name: l.name, requests_per_unit: l.requestsPerUnit, unit: l.unit },
        name: l.name,
        replaces: l.replaces,
        zero: l.requestsPerUnit === 0,
        shadow: l.shadow,
        quota: l.quota && !l.shadow,
      };
    }
    // The native domain: entries `tenant` and `resource`, in that order, name a key of the policies file.
    const [t, r, ...rest] = d.entries;
    if (t?.key !== "tenant" || r?.key !== "resource" || rest.length > 0) return NONE;
    return {
      kind: "key",
      tenant: t.value,
      resource: r.value,
      name: "",
      replaces: [],
      zero: false,
      shadow: false,
      quota: false,
    };
  }

  private static validate(req: RlsRequest): void {
    if (typeof req.domain !== "string" || req.domain === "") {
      throw new RlsError("INVALID_ARGUMENT", "domain: rate limit domain must not be empty");
    }
    if (req.descriptors === undefined || req.descriptors === null || req.descriptors.length === 0) {
      throw new RlsError("INVALID_ARGUMENT", "descriptors: rate limit descriptor list must not be empty");
    }
    req.descriptors.forEach((d, i) => {
      if (d.entries.length === 0)
        throw new RlsError("INVALID_ARGUMENT", `descriptors[${i}].entries: expected at least one entry`);
      if (d.is_negative_hits === true) {
        throw new RlsError(
          "INVALID_ARGUMENT",
          `descriptors[${i}].is_negative_hits: geoquota gives quota back only against a refund receipt (POST /v1/refund), never from a descriptor`,
        );
      }
      d.entries.forEach((e, j) => {
        if (e.key === "")
          throw new RlsError("INVALID_ARGUMENT", `descriptors[${i}].entries[${j}].key: must not be empty`);
      });
    });
  }

  /** Per descriptor: its own hits_addend when set (0 = check only), else the request's (0 or unset = 1). */
  static costs(req: RlsRequest): number[] {
    return req.descriptors.map((d, i) => {
      const own = d.hits_addend;
      const cost = own !== null && own !== undefined ? own.value : Math.max(1, req.hits_addend ?? 0);
      if (!Number.isSafeInteger(cost) || cost < 0 || cost > RLS_COST_MAX) {
        throw new RlsError(
          "INVALID_ARGUMENT",
          `descriptors[${i}].hits_addend: expected an integer in [0, ${RLS_COST_MAX}]`,
        );
      }
      return cost;
    });
  }

  async shouldRateLimit(req: RlsRequest): Promise<RlsResponse> {
    RlsService.validate(req);
    const costs = RlsService.costs(req);
    let targets = req.descriptors.map((d, i) => this.targetOf(req.domain, d, i));
    // `replaces`: a named limit that another matched limit replaces does not apply.
    const replaced = new Set(targets.flatMap((t) => (t.kind === "none" ? [] : t.replaces)));
    targets = targets.map((t) => (t.kind === "key" && t.name !== "" && replaced.has(t.name) ? NONE : t));
    // A zero limit denies (a quota-mode one only with every quota-mode limit over: see below).
    const quotas = targets.filter((t) => t.kind === "key" && t.quota);
    const zeroDenies =
      targets.some((t) => t.kind === "key" && t.zero && !t.shadow && !t.quota) ||
      (quotas.length > 0 && quotas.every((t) => t.kind === "key" && t.zero));
    // One store item per distinct key: descriptors naming the same counter add up.
    const groups = new Map<string, { tenant: string; resource: string; cost: number; checkOnly: boolean }>();
    const groupOf: (string | undefined)[] = targets.map((t, i) => {
      if (t.kind !== "key" || t.zero) return undefined;
      const id = `${t.tenant}\u0000${t.resource}`;
      const g = groups.get(id) ?? { tenant: t.tenant, resource: t.resource, cost: 0, checkOnly: true };
      g.cost += costs[i]!;
      g.checkOnly = g.checkOnly && costs[i] === 0;
      groups.set(id, g);
      return id;
    });
    const ids = [...groups.keys()];
    const items: CompoundItem[] = [...groups.values()].map((g) =>
      // A request a zero limit denies charges nothing: its other limits are only read (need 0).
      zeroDenies
        ? { tenant: g.tenant, resource: g.resource, cost: 0, need: 0 }
        : g.checkOnly
          ? { tenant: g.tenant, resource: g.resource, cost: 0, need: 1 }
          : { tenant: g.tenant, resource: g.resource, cost: g.cost },
    );
    const result = items.length > 0 ? await this.decide(items) : undefined;
    const statuses: RlsStatus[] = targets.map((t, i) => {
      if (t.kind === "none") return { code: "OK", limit_remaining: 0 };
      if (t.kind === "unlimited") return { code: "OK", limit_remaining: UINT32_MAX };
      if (t.zero) {
        return {
          code: t.shadow ? "OK" : "OVER_LIMIT",
          ...(t.current !== undefined ? { current_limit: t.current } : {}),
          limit_remaining: 0,
          duration_until_reset: { seconds: UNIT_SECONDS[t.current!.unit as EnvoyUnit], nanos: 0 },
        };
      }
      const at = ids.indexOf(groupOf[i]!);
      const part = result!.parts[at]!;
      // A part that passed in a check that was denied was not charged: it still holds its cost.
      const uncharged = !result!.allowed && part.allowed ? items[at]!.cost : 0;
      return this.status(t, part, uncharged);
    });
    // envoyproxy/ratelimit's rule: OVER_LIMIT iff a limit is over, or every quota-mode limit is.
    // A quota-mode limit is decided as a shadow one (a would-deny charges nothing and lets the
    // others be decided); when all of them are over, the others' charges stand although the
    // request is denied — conservative (never more admitted than the limits allow).
    const quotaOver = statuses.filter((_s, i) => (targets[i] as { quota?: boolean }).quota === true);
    const over =
      statuses.some(
        (s, i) => s.code === "OVER_LIMIT" && (targets[i] as { quota?: boolean }).quota !== true,
      ) ||
      (quotaOver.length > 0 && quotaOver.every((s) => s.code === "OVER_LIMIT"));
    return {
      overall_code: over ? "OVER_LIMIT" : "OK",
      statuses,
      response_headers_to_add: result !== undefined ? this.headers(result, over) : [],
    };
  }

  private status(t: Extract<RlsTarget, { kind: "key" }>, part: CheckResult, uncharged: number): RlsStatus {
    // A quota-mode limit is a shadow key: its would-deny is its own OVER_LIMIT.
    const over = !part.allowed || (t.quota && part.wouldDeny === true);
    return {
      code: over ? "OVER_LIMIT" : "OK",
      // Envoy builds its X-RateLimit-* headers from current_limit and sends none without it.
      current_limit: t.current ?? currentOfSpec(`${t.tenant}/${t.resource}`, part.policy.limit),
      limit_remaining: over || part.wouldDeny === true ? 0 : clampU32(part.remaining + uncharged),
      duration_until_reset: { seconds: Math.max(0, Math.ceil(part.resetSeconds)), nanos: 0 },
    };
  }

  /** The IETF RateLimit fields of the HTTP API, for the limit that denied, else the closest to its end. */
  private headers(r: CompoundResult, over: boolean): { key: string; value: string }[] {
    const parts = r.parts;
    const pick = over
      ? parts.find((p) => !p.allowed)
      : parts.reduce<CheckResult | undefined>(
          (a, p) => (a === undefined || p.remaining < a.remaining ? p : a),
          undefined,
        );
    if (pick === undefined) return [];
    const h = rateLimitHeaders(pick);
    return HEADER_NAMES.flatMap((k) => (h[k] !== undefined ? [{ key: k, value: h[k] }] : []));
  }

  private async decide(items: readonly CompoundItem[]): Promise<CompoundResult> {
    try {
      // One charged limit: the limiter's single check, with its in-process leases and, when
      // configured, fail-open (the limiter keeps both off compound checks).
      const only = items.length === 1 ? items[0]! : undefined;
      if (only !== undefined && only.need === undefined) {
        const r = await this.limiter.check(only.tenant, only.resource, only.cost);
        return { allowed: r.allowed, failedIndex: r.allowed ? -1 : 0, parts: [r], degraded: r.degraded };
      }
      return await this.limiter.checkCompound(items);
    } catch (err) {
      if (err instanceof LimiterError) {
        throw new RlsError(
          err.statusCode >= 400 && err.statusCode < 500 ? "INVALID_ARGUMENT" : "UNAVAILABLE",
          err.message,
        );
      }
      throw new RlsError(
        "UNAVAILABLE",
        `the region could not decide: ${(err as Error).message ?? String(err)}`,
      );
    }
  }
}
