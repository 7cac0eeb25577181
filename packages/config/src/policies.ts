// Policies file `regions/policies.json`: limits per (tenant, resource), with a
// per-resource default (tenant "*") and a global default for everything else.
import { ALGORITHMS, type Algorithm, type KeyPolicy, quotaKey } from "@geoquota/lease";
import { z } from "zod";
import { ID_MESSAGE, ID_PATTERN, SHARE_UNITS } from "./common.js";
import { ConfigError, issuesOf } from "./errors.js";
import { readJsonFile } from "./region.js";

const WINDOW_ALGORITHMS: ReadonlySet<Algorithm> = new Set(["sliding_window", "fixed_window", "sliding_log"]);

const positive = (what: string) =>
  z
    .number({ error: `expected ${what}` })
    .refine((n) => Number.isFinite(n) && n > 0, `expected a finite number > 0`);

export const PolicySpecSchema = z
  .strictObject({
    algorithm: z.enum(ALGORITHMS).default("token_bucket"),
    capacity: positive("capacity > 0"),
    /** Either refillPerSecond or refill {tokens, perSeconds} (exact for "1000 per minute"). */
    refillPerSecond: positive("refill per second > 0").optional(),
    refill: z
      .strictObject({ tokens: positive("tokens > 0"), perSeconds: positive("seconds > 0") })
      .optional(),
    windowMs: z.number().int("expected integer ms").min(1, "expected number ≥ 1").max(86_400_000).optional(),
    /** Static base weights per region; equal across all configured regions when absent. */
    weights: z
      .record(z.string(), z.number().min(0, "expected weight ≥ 0").refine(Number.isFinite))
      .optional(),
    /** This policy's per-region floor, ppm (overrides the region config's floorPpm). */
    floorPpm: z.number().int().min(0).max(SHARE_UNITS).optional(),
  })
  .superRefine((p, ctx) => {
    const windowed = WINDOW_ALGORITHMS.has(p.algorithm);
    if (p.refill !== undefined && p.refillPerSecond !== undefined) {
      ctx.addIssue({ code: "custom", message: "give refill or refillPerSecond, not both", path: ["refill"] });
    }
    if (!windowed && p.refill === undefined && p.refillPerSecond === undefined) {
      ctx.addIssue({
        code: "custom",
        message: "expected refill or refillPerSecond",
        path: ["refillPerSecond"],
      });
    }
    if (windowed && p.windowMs === undefined) {
      ctx.addIssue({ code: "custom", message: `expected windowMs for ${p.algorithm}`, path: ["windowMs"] });
    }
    // Fields the algorithm would ignore are refused rather than silently dropped.
    if (!windowed && p.windowMs !== undefined) {
      ctx.addIssue({
        code: "custom",
        message: `windowMs applies to window algorithms only; ${p.algorithm} refills continuously`,
        path: ["windowMs"],
      });
    }
    if (windowed && (p.refill !== undefined || p.refillPerSecond !== undefined)) {
      ctx.addIssue({
        code: "custom",
        message: `${p.algorithm} admits capacity per windowMs; its refill is derived (capacity / windowMs)`,
        path: [p.refill !== undefined ? "refill" : "refillPerSecond"],
      });
    }
    if (p.weights !== undefined) {
      const sum = Object.values(p.weights).reduce((a, b) => a + b, 0);
      if (!(sum > 0))
        ctx.addIssue({ code: "custom", message: "expected weights summing to > 0", path: ["weights"] });
    }
  });

export type PolicySpecInput = z.input<typeof PolicySpecSchema>;

/** A normalized policy: refill in tokens per second. */
export interface PolicySpec {
  readonly algorithm: Algorithm;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly windowMs?: number;
  readonly weights?: Readonly<Record<string, number>>;
  readonly floorPpm?: number;
}

const tenantOrStar = z.string().refine((s) => s === "*" || ID_PATTERN.test(s), `${ID_MESSAGE} or "*"`);

export const PoliciesFileSchema = z.strictObject({
  default: PolicySpecSchema,
  policies: z
    .array(z.looseObject({ tenant: tenantOrStar, resource: z.string().regex(ID_PATTERN, ID_MESSAGE) }))
    .max(100_000)
    .default([]),
});

export interface PolicySet {
  readonly default: PolicySpec;
  /** Keyed by `tenant|resource`; tenant "*" is the resource's default. */
  readonly entries: ReadonlyMap<string, PolicySpec>;
}

function normalize(p: z.output<typeof PolicySpecSchema>): PolicySpec {
  const refillPerSecond =
    p.refill !== undefined
      ? p.refill.tokens / p.refill.perSeconds
      : (p.refillPerSecond ?? p.capacity / ((p.windowMs ?? 1000) / 1000));
  return {
    algorithm: p.algorithm,
    capacity: p.capacity,
    refillPerSecond,
    ...(p.windowMs !== undefined ? { windowMs: p.windowMs } : {}),
    ...(p.weights !== undefined ? { weights: p.weights } : {}),
    ...(p.floorPpm !== undefined ? { floorPpm: p.floorPpm } : {}),
  };
}

function weightProblems(spec: PolicySpec, regionIds: readonly string[] | undefined): string[] {
  if (spec.weights === undefined || regionIds === undefined) return [];
  const out: string[] = [];
  for (const id of Object.keys(spec.weights)) {
    if (!regionIds.includes(id))
      out.push(`weights.${id}: unknown region (configured: ${regionIds.join(", ")})`);
  }
  const total = regionIds.reduce((a, id) => a + (spec.weights?.[id] ?? 0), 0);
  if (!(total > 0)) out.push("weights: expected a weight > 0 for at least one configured region");
  return out;
}

/** The region config's rule for its floorPpm, for a policy's own floor: a floor no region can keep. */
function floorProblems(spec: PolicySpec, regionIds: readonly string[] | undefined): string[] {
  if (spec.floorPpm === undefined || regionIds === undefined) return [];
  if (spec.floorPpm * regionIds.length <= SHARE_UNITS) return [];
  return [`floorPpm: floor × ${regionIds.length} regions exceeds ${SHARE_UNITS}`];
}

/**
 * Validates one policy (e.g. an admin PUT body). `regionIds` checks weights
 * against the configured regions. Returns issues as `field: message`.
 */
export function parsePolicySpec(
  raw: unknown,
  regionIds?: readonly string[],
): { ok: true; spec: PolicySpec } | { ok: false; issues: string[] } {
  const r = PolicySpecSchema.safeParse(raw);
  if (!r.success) return { ok: false, issues: issuesOf(r.error) };
  const spec = normalize(r.data);
  const problems = [...weightProblems(spec, regionIds), ...floorProblems(spec, regionIds)];
  return problems.length > 0 ? { ok: false, issues: problems } : { ok: true, spec };
}

export function parsePolicies(raw: unknown, file: string, regionIds?: readonly string[]): PolicySet {
  const top = PoliciesFileSchema.safeParse(raw);
  if (!top.success) throw new ConfigError(file, issuesOf(top.error));
  const issues: string[] = [];
  const def = parsePolicySpec(top.data.default, regionIds);
  if (!def.ok) issues.push(...def.issues.map((i) => `default.${i}`));
  const entries = new Map<string, PolicySpec>();
  top.data.policies.forEach((entry, idx) => {
    const { tenant, resource, ...rest } = entry;
    const r = parsePolicySpec(rest, regionIds);
    if (!r.ok) {
      issues.push(...r.issues.map((i) => `policies[${idx}].${i}`));
      return;
    }
    const key = quotaKey(tenant, resource);
    if (entries.has(key)) issues.push(`policies[${idx}]: duplicate policy for ${tenant}/${resource}`);
    entries.set(key, r.spec);
  });
  if (issues.length > 0 || !def.ok) throw new ConfigError(file, issues);
  return { default: def.spec, entries };
}

export function loadPolicies(path: string, regionIds?: readonly string[]): PolicySet {
  return parsePolicies(readJsonFile(path), path, regionIds);
}

/** A copy of `set` with one policy replaced (policies are swapped, never mutated in place). */
export function withPolicy(set: PolicySet, tenant: string, resource: string, spec: PolicySpec): PolicySet {
  const entries = new Map(set.entries);
  entries.set(quotaKey(tenant, resource), spec);
  return { default: set.default, entries };
}

/** The spec that applies: exact (tenant, resource), then (*, resource), then the default. */
export function lookupPolicy(set: PolicySet, tenant: string, resource: string): PolicySpec {
  return (
    set.entries.get(quotaKey(tenant, resource)) ?? set.entries.get(quotaKey("*", resource)) ?? set.default
  );
}

/**
 * Integer ppm per region summing to exactly 1_000_000: floor of each exact
 * share, then the remainder one unit each to the largest fractional parts,
 * ties by region id. Every region computes the same split from the same input
 * (independent of the order regions are listed), which Σ s_i ≤ U relies on.
 */
export function baseShares(
  regionIds: readonly string[],
  weights?: Readonly<Record<string, number>>,
): Record<string, number> {
  const ids = [...regionIds].sort();
  const w = ids.map((id) => (weights === undefined ? 1 : (weights[id] ?? 0)));
  const total = w.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new RangeError("weights must sum to > 0");
  const exact = w.map((x) => (x * SHARE_UNITS) / total);
  const out: Record<string, number> = {};
  let assigned = 0;
  const order = ids.map((id, i) => {
    const e = exact[i] ?? 0;
    const f = Math.floor(e);
    out[id] = f;
    assigned += f;
    return { id, frac: e - f };
  });
  order.sort((a, b) => b.frac - a.frac || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  let remainder = SHARE_UNITS - assigned;
  for (let i = 0; remainder > 0; i = (i + 1) % order.length, remainder--) {
    const id = order[i]!.id;
    out[id] = (out[id] ?? 0) + 1;
  }
  return out;
}

export const DEFAULT_FLOOR_PPM = 20_000;
const shareCache = new WeakMap<PolicySpec, Map<string, Record<string, number>>>();

function sharesFor(spec: PolicySpec, ids: readonly string[]): Record<string, number> {
  let byRegions = shareCache.get(spec);
  if (byRegions === undefined) {
    byRegions = new Map();
    shareCache.set(spec, byRegions);
  }
  const k = ids.join(",");
  let shares = byRegions.get(k);
  if (shares === undefined) {
    shares = baseShares(ids, spec.weights);
    byRegions.set(k, shares);
  }
  return shares;
}

export function resolvePolicy(
  policies: PolicySet,
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number } = {},
): KeyPolicy {
  const spec = lookupPolicy(policies, tenant, resource);
  const ids = regions.map((r) => (typeof r === "string" ? r : r.id));
  const baseShare = sharesFor(spec, ids)[regionId];
  if (baseShare === undefined) throw new RangeError(`region ${regionId} is not configured`);
  const floor = spec.floorPpm ?? options.floorPpm ?? DEFAULT_FLOOR_PPM;
  return {
    tenant,
    resource,
    limit: {
      algorithm: spec.algorithm,
      capacity: spec.capacity,
      refillPerSecond: spec.refillPerSecond,
      ...(spec.windowMs !== undefined ? { windowMs: spec.windowMs } : {}),
    },
    baseShare,
    floorShare: Math.min(floor, baseShare),
  };
}

/**
 * The policy a region enforces while a change rolls out (DESIGN §3, "Policy
 * changes are replicated state"): the meet of every version it must respect —
 * the last version it completed and every newer one it knows, oldest first.
 * Capacity, refill, base share and floor are the minimum over the versions
 * (what shrinks applies at once, nothing grows before the rollout completes);
 * algorithm and window come from the newest version (a change of algorithm
 * restarts the key's bucket, empty, under it). One set: exactly resolvePolicy.
 */
export function resolveEffective(
  sets: readonly PolicySet[],
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number } = {},
): KeyPolicy {
  const newest = sets[sets.length - 1];
  if (newest === undefined) throw new RangeError("resolveEffective: no policy set");
  const target = resolvePolicy(newest, regions, regionId, tenant, resource, options);
  if (sets.length === 1) return target;
  let capacity = target.limit.capacity;
  let refillPerSecond = target.limit.refillPerSecond;
  let baseShare = target.baseShare;
  let floorShare = target.floorShare;
  for (let i = 0; i < sets.length - 1; i++) {
    const p = resolvePolicy(sets[i] as PolicySet, regions, regionId, tenant, resource, options);
    capacity = Math.min(capacity, p.limit.capacity);
    refillPerSecond = Math.min(refillPerSecond, p.limit.refillPerSecond);
    baseShare = Math.min(baseShare, p.baseShare);
    floorShare = Math.min(floorShare, p.floorShare);
  }
  return {
    tenant,
    resource,
    limit: { ...target.limit, capacity, refillPerSecond },
    baseShare,
    floorShare: Math.min(floorShare, baseShare),
  };
}
