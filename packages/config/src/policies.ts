// Policies file `regions/policies.json`: limits per (tenant, resource), with a
// per-resource default (tenant "*") and a global default for everything else.
import { ALGORITHMS, type Algorithm, type KeyPolicy, quotaKey } from "@geoquota/lease";
import { z } from "zod";
import { ID_MESSAGE, ID_PATTERN, SHARE_UNITS } from "./common.js";
import { ConfigError, issuesOf } from "./errors.js";
import { keyLimitSpec } from "./key-limits.js";
import { readJsonFile } from "./region.js";

const WINDOW_ALGORITHMS: ReadonlySet<Algorithm> = new Set(["sliding_window", "fixed_window", "sliding_log"]);

const positive = (what: string) =>
  z
    .number({ error: `expected ${what}` })
    .refine((n) => Number.isFinite(n) && n > 0, `expected a finite number > 0`);

const specShape = {
  algorithm: z.enum(ALGORITHMS).default("token_bucket"),
  capacity: positive("capacity > 0"),
  /** Either refillPerSecond or refill {tokens, perSeconds} (exact for "1000 per minute"). */
  refillPerSecond: positive("refill per second > 0").optional(),
  refill: z.strictObject({ tokens: positive("tokens > 0"), perSeconds: positive("seconds > 0") }).optional(),
  windowMs: z.number().int("expected integer ms").min(1, "expected number ≥ 1").max(86_400_000).optional(),
  /** Static base weights per region; equal across all configured regions when absent. */
  weights: z.record(z.string(), z.number().min(0, "expected weight ≥ 0").refine(Number.isFinite)).optional(),
  /** This policy's per-region floor, ppm (overrides the region config's floorPpm). */
  floorPpm: z.number().int().min(0).max(SHARE_UNITS).optional(),
  /** Decisions computed and reported (`wouldDeny`), never denied. */
  shadow: z.boolean({ error: "expected true or false" }).optional(),
};

type SpecFields = {
  algorithm: Algorithm;
  refill?: unknown;
  refillPerSecond?: number | undefined;
  windowMs?: number | undefined;
  weights?: Record<string, number> | undefined;
};

function specRules(p: SpecFields, ctx: z.RefinementCtx): void {
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
}

export const PolicySpecSchema = z.strictObject(specShape).superRefine(specRules);

export type PolicySpecInput = z.input<typeof PolicySpecSchema>;

/** A normalized policy: refill in tokens per second. */
export interface PolicySpec {
  readonly algorithm: Algorithm;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly windowMs?: number;
  readonly weights?: Readonly<Record<string, number>>;
  readonly floorPpm?: number;
  /** Shadow mode: the decision is computed and reported (`wouldDeny`), never enforced. */
  readonly shadow?: boolean;
}

const tenantOrStar = z.string().refine((s) => s === "*" || ID_PATTERN.test(s), `${ID_MESSAGE} or "*"`);

/** Per-key overrides: any PolicySpec field, replacing that field of whatever the lookup resolves. */
const overrideShape = {
  tenant: z.string().regex(ID_PATTERN, ID_MESSAGE),
  resource: z.string().regex(ID_PATTERN, ID_MESSAGE),
  ...specShape,
  algorithm: z.enum(ALGORITHMS).optional(),
  capacity: positive("capacity > 0").optional(),
};

const GLOB_PART = "[A-Za-z0-9_.*-]{1,128}";
const GLOB_PATTERN = new RegExp(`^${GLOB_PART}/${GLOB_PART}$`);
const GLOB_MESSAGE =
  'expected "<tenant glob>/<resource glob>": characters of [A-Za-z0-9_.-] and * (any run of characters), exactly one /';

const ListEntrySchema = z
  .strictObject({
    tenant: z.string().regex(ID_PATTERN, ID_MESSAGE).optional(),
    key: z.string().regex(GLOB_PATTERN, GLOB_MESSAGE).optional(),
  })
  .refine((e) => (e.tenant === undefined) !== (e.key === undefined), {
    message: 'expected exactly one of "tenant" or "key"',
  });

/** Entries of an allow or deny list, at most this many per list (each check scans the key globs). */
export const ACCESS_LIST_MAX = 10_000;

const accessList = z
  .array(ListEntrySchema)
  .max(ACCESS_LIST_MAX, `expected at most ${ACCESS_LIST_MAX} entries`);

export const PoliciesFileSchema = z.strictObject({
  default: PolicySpecSchema,
  policies: z
    .array(z.looseObject({ tenant: tenantOrStar, resource: z.string().regex(ID_PATTERN, ID_MESSAGE) }))
    .max(100_000)
    .default([]),
  /** Keys answered "allowed" without touching Redis (unless a deny entry also matches). */
  allow: accessList.default([]),
  /** Keys answered "denied" (403) without touching Redis; deny wins over allow. */
  deny: accessList.default([]),
  overrides: z.array(z.strictObject(overrideShape)).max(100_000).default([]),
});

export type PolicyOverrideFields = Partial<
  Omit<z.output<z.ZodObject<typeof overrideShape>>, "tenant" | "resource">
>;

export interface PolicyOverride {
  readonly tenant: string;
  readonly resource: string;
  /** The fields the override gives (validated alone). */
  readonly fields: PolicyOverrideFields;
  /** Those fields on top of what the lookup resolves without the override (validated together). */
  readonly spec: PolicySpec;
}

/** An allow or deny list: exact tenants, exact keys, and key globs (`*` = any run of characters). */
export interface AccessList {
  readonly tenants: ReadonlySet<string>;
  /** `tenant|resource` of entries without `*`. */
  readonly keys: ReadonlySet<string>;
  readonly globs: readonly { readonly tenant: string; readonly resource: string }[];
}

export type Access = "allow" | "deny" | "limit";

export interface PolicySet {
  readonly default: PolicySpec;
  /** Keyed by `tenant|resource`; tenant "*" is the resource's default. */
  readonly entries: ReadonlyMap<string, PolicySpec>;
  /** Keyed by `tenant|resource` (exact keys only). */
  readonly overrides?: ReadonlyMap<string, PolicyOverride>;
  readonly allow?: AccessList;
  readonly deny?: AccessList;
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
    ...(p.shadow !== undefined ? { shadow: p.shadow } : {}),
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
  const allow = accessListOf(top.data.allow, "allow", issues);
  const deny = accessListOf(top.data.deny, "deny", issues);
  if (issues.length > 0 || !def.ok) throw new ConfigError(file, issues);
  const base: PolicySet = { default: def.spec, entries };
  const raws = new Map<string, RawOverride>();
  top.data.overrides.forEach((o, idx) => {
    const { tenant, resource, ...fields } = o;
    const key = quotaKey(tenant, resource);
    const first = raws.get(key);
    if (first !== undefined) {
      issues.push(
        `overrides[${idx}]: duplicate override for ${tenant}/${resource} (first at overrides[${first.idx}])`,
      );
      return;
    }
    if (Object.keys(fields).length === 0) {
      issues.push(`overrides[${idx}]: expected at least one policy field to override`);
      return;
    }
    raws.set(key, { idx, tenant, resource, fields });
  });
  const overrides = mergeOverrides(base, raws, regionIds, issues);
  if (issues.length > 0) throw new ConfigError(file, issues);
  return { ...base, overrides, allow, deny };
}

function accessListOf(
  entries: readonly { tenant?: string | undefined; key?: string | undefined }[],
  field: string,
  issues: string[],
): AccessList {
  const tenants = new Set<string>();
  const keys = new Set<string>();
  const globs: { tenant: string; resource: string }[] = [];
  const seen = new Map<string, number>();
  entries.forEach((e, idx) => {
    const id = e.tenant !== undefined ? `tenant ${e.tenant}` : `key ${e.key}`;
    const first = seen.get(id);
    if (first !== undefined) {
      issues.push(`${field}[${idx}]: duplicate entry (${id}, first at ${field}[${first}])`);
      return;
    }
    seen.set(id, idx);
    if (e.tenant !== undefined) tenants.add(e.tenant);
    else if (e.key !== undefined) {
      const slash = e.key.indexOf("/");
      const tenant = e.key.slice(0, slash);
      const resource = e.key.slice(slash + 1);
      if (e.key.includes("*")) globs.push({ tenant, resource });
      else keys.add(quotaKey(tenant, resource));
    }
  });
  return { tenants, keys, globs };
}

const WINDOWED = (a: Algorithm) => WINDOW_ALGORITHMS.has(a);

/**
 * The input an override makes on top of `base`: its fields replace the base's; the rate
 * (`refill` / `refillPerSecond`) is one field; base fields the resulting algorithm does
 * not take (a window on a rate algorithm, a refill on a window algorithm) are dropped.
 */
function overrideInput(base: PolicySpec, o: PolicyOverrideFields): Record<string, unknown> {
  const algorithm = o.algorithm ?? base.algorithm;
  const windowed = WINDOWED(algorithm);
  const baseWindowed = WINDOWED(base.algorithm);
  const out: Record<string, unknown> = { algorithm, capacity: o.capacity ?? base.capacity };
  if (o.refill !== undefined) out.refill = o.refill;
  if (o.refillPerSecond !== undefined) out.refillPerSecond = o.refillPerSecond;
  if (o.refill === undefined && o.refillPerSecond === undefined && !windowed && !baseWindowed)
    out.refillPerSecond = base.refillPerSecond;
  if (o.windowMs !== undefined) out.windowMs = o.windowMs;
  else if (windowed && baseWindowed && base.windowMs !== undefined) out.windowMs = base.windowMs;
  const weights = o.weights ?? base.weights;
  if (weights !== undefined) out.weights = weights;
  const floorPpm = o.floorPpm ?? base.floorPpm;
  if (floorPpm !== undefined) out.floorPpm = floorPpm;
  const shadow = o.shadow ?? base.shadow;
  if (shadow !== undefined) out.shadow = shadow;
  return out;
}

interface RawOverride {
  readonly idx: number;
  readonly tenant: string;
  readonly resource: string;
  readonly fields: PolicyOverrideFields;
}

function mergeOverrides(
  base: PolicySet,
  raws: ReadonlyMap<string, RawOverride>,
  regionIds: readonly string[] | undefined,
  issues: string[],
): Map<string, PolicyOverride> {
  const out = new Map<string, PolicyOverride>();
  for (const [key, { idx, tenant, resource, fields }] of raws) {
    const under = lookupPolicy(base, tenant, resource);
    const r = parsePolicySpec(overrideInput(under, fields), regionIds);
    if (!r.ok) {
      const on = base.entries.has(key)
        ? `policies entry ${tenant}/${resource}`
        : base.entries.has(quotaKey("*", resource))
          ? `policies entry */${resource}`
          : "default";
      issues.push(...r.issues.map((i) => `overrides[${idx}].${i} (with the ${on} it overrides)`));
      continue;
    }
    out.set(key, { tenant, resource, fields, spec: r.spec });
  }
  return out;
}

export function loadPolicies(path: string, regionIds?: readonly string[]): PolicySet {
  return parsePolicies(readJsonFile(path), path, regionIds);
}

/**
 * A copy of `set` with one policy replaced (policies are swapped, never mutated in place).
 * Overrides are re-applied on top; throws a ConfigError naming the override that no longer
 * makes a valid policy.
 */
export function withPolicy(set: PolicySet, tenant: string, resource: string, spec: PolicySpec): PolicySet {
  const entries = new Map(set.entries);
  entries.set(quotaKey(tenant, resource), spec);
  const next: PolicySet = { ...set, entries };
  if (set.overrides === undefined || set.overrides.size === 0) return next;
  const raws = new Map([...set.overrides].map(([k, o], idx) => [k, { ...o, idx }]));
  const issues: string[] = [];
  const overrides = mergeOverrides({ default: set.default, entries }, raws, undefined, issues);
  if (issues.length > 0) throw new ConfigError(`policy ${tenant}/${resource}`, issues);
  return { ...next, overrides };
}

/**
 * The spec that applies: a limit the resource's name states (key-limits.ts, the RLS front
 * door), else exact (tenant, resource), then (*, resource), then the default; a key's
 * override on top of it.
 */
export function lookupPolicy(set: PolicySet, tenant: string, resource: string): PolicySpec {
  const key = quotaKey(tenant, resource);
  return (
    keyLimitSpec(resource) ??
    set.overrides?.get(key)?.spec ??
    set.entries.get(key) ??
    set.entries.get(quotaKey("*", resource)) ??
    set.default
  );
}

/** `*` matches any run of characters (none included); linear-time, no regex backtracking. */
export function globMatch(glob: string, s: string): boolean {
  let g = 0;
  let i = 0;
  let star = -1;
  let mark = 0;
  while (i < s.length) {
    if (g < glob.length && glob[g] !== "*" && glob[g] === s[i]) {
      g++;
      i++;
    } else if (g < glob.length && glob[g] === "*") {
      star = g++;
      mark = i;
    } else if (star >= 0) {
      g = star + 1;
      i = ++mark;
    } else return false;
  }
  while (g < glob.length && glob[g] === "*") g++;
  return g === glob.length;
}

function listed(list: AccessList | undefined, tenant: string, resource: string): boolean {
  if (list === undefined) return false;
  if (list.tenants.has(tenant) || list.keys.has(quotaKey(tenant, resource))) return true;
  for (const g of list.globs) if (globMatch(g.tenant, tenant) && globMatch(g.resource, resource)) return true;
  return false;
}

/** One set's verdict on a key, by the names as given: deny wins over allow. */
export function accessOf(set: PolicySet, tenant: string, resource: string): Access {
  if (listed(set.deny, tenant, resource)) return "deny";
  if (listed(set.allow, tenant, resource)) return "allow";
  return "limit";
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
  return keyPolicyOf(lookupPolicy(policies, tenant, resource), regions, regionId, tenant, resource, options);
}

/** A key's policy in `regionId` from the spec that applies to it (resolvePolicy after the lookup). */
function keyPolicyOf(
  spec: PolicySpec,
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number },
): KeyPolicy {
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

/** How a region treats a key under the policy versions it must respect (`resolveKey`). */
export interface ResolvedKey {
  /** The meet of the versions' policies (the limiting versions' only, for `limit`). */
  readonly policy: KeyPolicy;
  /** Decided and reported (`wouldDeny`) but never denied: every limiting version says shadow. */
  readonly shadow: boolean;
  /** deny: some version denies the key; allow: every version allows it; else limit. */
  readonly access: Access;
}

function meet(
  sets: readonly PolicySet[],
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number },
): KeyPolicy {
  const newest = sets[sets.length - 1];
  if (newest === undefined) throw new RangeError("resolveKey: no policy set");
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

/**
 * How a region treats a key while a policy change rolls out (DESIGN §3, "Policy changes
 * are replicated state"): the meet of every version it must respect — the last version it
 * completed and every newer one it knows, oldest first — so that whatever is more
 * restrictive applies at once and nothing loosens before the rollout completes.
 * - access: deny if any version denies the key (deny list); allow (no limit) only if every
 *   version allows it; else limit.
 * - policy (overrides applied per version first): capacity, refill, base share and floor are
 *   the minimum over the versions that limit the key (a version that allows it is no limit);
 *   algorithm and window come from the newest of them (a change of algorithm restarts the
 *   key's bucket, empty, under it). For allow and deny: the meet over every version.
 * - shadow: only if every version that limits the key says shadow (an allowing version is
 *   at least as permissive as shadow).
 * One set: exactly resolvePolicy and that set's lists.
 */
export function resolveKey(
  sets: readonly PolicySet[],
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number } = {},
): ResolvedKey {
  if (sets.length === 0) throw new RangeError("resolveKey: no policy set");
  if (sets.length === 1) {
    // No rollout in progress (every check outside one): one lookup, no meet, no arrays.
    const set = sets[0] as PolicySet;
    const access = accessOf(set, tenant, resource);
    const spec = lookupPolicy(set, tenant, resource);
    const policy = keyPolicyOf(spec, regions, regionId, tenant, resource, options);
    return { policy, shadow: access === "limit" && spec.shadow === true, access };
  }
  const access = sets.map((set) => accessOf(set, tenant, resource));
  if (access.includes("deny") || access.every((a) => a === "allow")) {
    return {
      policy: meet(sets, regions, regionId, tenant, resource, options),
      shadow: false,
      access: access.includes("deny") ? "deny" : "allow",
    };
  }
  const limiting = sets.filter((_, i) => access[i] === "limit");
  const shadow = limiting.every((set) => lookupPolicy(set, tenant, resource).shadow === true);
  const policy = meet(limiting, regions, regionId, tenant, resource, options);
  return { policy, shadow, access: "limit" };
}

/** The policy of `resolveKey` alone (what the daemon and the scripts need). */
export function resolveEffective(
  sets: readonly PolicySet[],
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: { floorPpm?: number } = {},
): KeyPolicy {
  return resolveKey(sets, regions, regionId, tenant, resource, options).policy;
}
