// Policies file `regions/policies.json`: limits per (tenant, resource), with a
// per-resource default (tenant "*") and a global default for everything else.
import {
  ALGORITHMS,
  type Algorithm,
  KEY_MAX_LENGTH,
  KEY_PATTERN,
  type KeyPolicy,
  parseQuotaKey,
  quotaKey,
} from "@geoquota/core";
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

/** The longest key name a policy may give: the check API's keyMaxLength is at most this. */
export const KEY_NAME_MAX = KEY_MAX_LENGTH;
export const KEY_NAME_MESSAGE = `expected a key name: 1-${KEY_NAME_MAX} characters, any but "|"`;

/**
 * A tenant or resource name as `POST /v1/check` takes it (any characters; stored hashed when
 * outside [A-Za-z0-9_.-], docs/design.md §7), except `|`, which separates tenant and resource in
 * quota keys (`tenant|resource`): a name holding it could alias another key's entry.
 */
export const keyNameSchema = z
  .string({ error: KEY_NAME_MESSAGE })
  .min(1, KEY_NAME_MESSAGE)
  .max(KEY_NAME_MAX, KEY_NAME_MESSAGE)
  .refine((s) => !s.includes("|"), KEY_NAME_MESSAGE);

const tenantOrStar = keyNameSchema;

const GLOB_PART = "[A-Za-z0-9_.*-]{1,128}";
const GLOB_PATTERN = new RegExp(`^${GLOB_PART}/${GLOB_PART}$`);
const GLOB_MESSAGE =
  'expected "<tenant glob>/<resource glob>": characters of [A-Za-z0-9_.-] and * (any run of characters), exactly one /';

/**
 * Per-key overrides: any PolicySpec field, replacing that field of whatever the lookup resolves.
 * Named by `tenant` + `resource` (exact names, any the check API takes) or by `key`, a
 * `<tenant glob>/<resource glob>` like the lists' (wildcard overrides; precedence: lookupPolicy).
 */
const overrideShape = {
  tenant: keyNameSchema
    .refine((s) => s !== "*", 'expected a tenant name; for every tenant use key "*/<resource>"')
    .optional(),
  resource: keyNameSchema.optional(),
  key: z.string().regex(GLOB_PATTERN, GLOB_MESSAGE).optional(),
  ...specShape,
  algorithm: z.enum(ALGORITHMS).optional(),
  capacity: positive("capacity > 0").optional(),
};

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
    .array(z.looseObject({ tenant: tenantOrStar, resource: keyNameSchema }))
    .max(100_000)
    .default([]),
  /** Keys answered "allowed" without touching Redis (unless a deny entry also matches). */
  allow: accessList.default([]),
  /** Keys answered "denied" (403) without touching Redis; deny wins over allow. */
  deny: accessList.default([]),
  overrides: z
    .array(
      z
        .strictObject(overrideShape)
        .refine(
          (o) =>
            o.key === undefined
              ? o.tenant !== undefined && o.resource !== undefined
              : o.tenant === undefined && o.resource === undefined,
          { message: 'expected "tenant" and "resource", or "key" (a glob), not both' },
        ),
    )
    .max(100_000)
    .default([]),
});

/** Wildcard overrides per file, at most (each check scans them). */
export const WILDCARD_OVERRIDES_MAX = 1000;

export type PolicyOverrideFields = Partial<
  Omit<z.output<z.ZodObject<typeof overrideShape>>, "tenant" | "resource" | "key">
>;

/**
 * A wildcard override (`key: "<tenant glob>/<resource glob>"`). Its fields go on top of what
 * the lookup resolves for the concrete key, so the merged spec is per base spec (memoized).
 */
export interface WildcardOverride {
  readonly key: string;
  readonly tenant: string;
  readonly resource: string;
  readonly fields: PolicyOverrideFields;
  /** Characters other than `*` in both globs: the more, the more specific. */
  readonly literals: number;
  readonly stars: number;
}

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
  /** Wildcard overrides, most specific first (lookupPolicy takes the first that matches). */
  readonly wildcards?: readonly WildcardOverride[];
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
  const globs = new Map<string, { idx: number; w: WildcardOverride }>();
  top.data.overrides.forEach((o, idx) => {
    const { tenant: t, resource: r, key: glob, ...fields } = o;
    if (Object.keys(fields).length === 0) {
      issues.push(`overrides[${idx}]: expected at least one policy field to override`);
      return;
    }
    let tenant = t ?? "";
    let resource = r ?? "";
    if (glob !== undefined) {
      const slash = glob.indexOf("/");
      tenant = glob.slice(0, slash);
      resource = glob.slice(slash + 1);
      if (glob.includes("*")) {
        const first = globs.get(glob);
        if (first !== undefined) {
          issues.push(`overrides[${idx}]: duplicate override for ${glob} (first at overrides[${first.idx}])`);
          return;
        }
        const literals = glob.length - 1 - (glob.match(/\*/g)?.length ?? 0);
        const stars = glob.length - 1 - literals;
        globs.set(glob, { idx, w: { key: glob, tenant, resource, fields, literals, stars } });
        return;
      }
    }
    const key = quotaKey(tenant, resource);
    const first = raws.get(key);
    if (first !== undefined) {
      issues.push(
        `overrides[${idx}]: duplicate override for ${tenant}/${resource} (first at overrides[${first.idx}])`,
      );
      return;
    }
    raws.set(key, { idx, tenant, resource, fields });
  });
  if (globs.size > WILDCARD_OVERRIDES_MAX)
    issues.push(`overrides: expected at most ${WILDCARD_OVERRIDES_MAX} wildcard overrides (key globs)`);
  const overrides = mergeOverrides(base, raws, regionIds, issues);
  const wildcards = [...globs.values()].sort((a, b) => wildcardOrder(a.w, b.w));
  for (const { idx, w } of wildcards) checkWildcard(base, w, idx, regionIds, issues);
  if (issues.length > 0) throw new ConfigError(file, issues);
  return {
    ...base,
    overrides,
    ...(wildcards.length > 0 ? { wildcards: wildcards.map((x) => x.w) } : {}),
    allow,
    deny,
  };
}

/**
 * Precedence among wildcard overrides that match one key (an exact override beats them all):
 * more literal characters (both globs together) first, then fewer `*`, then the smaller key
 * string: deterministic, and independent of the order of the file.
 */
function wildcardOrder(a: WildcardOverride, b: WildcardOverride): number {
  return b.literals - a.literals || a.stars - b.stars || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/**
 * A wildcard override must make a valid policy on top of every spec it can land on: the
 * default, and each entry whose names its globs may match (a name outside [A-Za-z0-9_.-] is
 * matched by its stored hash, which is unknown here: such entries are checked too).
 */
function checkWildcard(
  base: PolicySet,
  w: WildcardOverride,
  idx: number,
  regionIds: readonly string[] | undefined,
  issues: string[],
): void {
  const may = (glob: string, name: string) => name === "*" || !PLAIN_NAME.test(name) || globMatch(glob, name);
  const under: [string, PolicySpec][] = [["the default", base.default]];
  for (const [k, spec] of base.entries) {
    const p = parseQuotaKey(k);
    if (p !== undefined && may(w.tenant, p.tenant) && may(w.resource, p.resource))
      under.push([`the policies entry ${p.tenant}/${p.resource}`, spec]);
  }
  for (const [on, spec] of under) {
    const r = parsePolicySpec(overrideInput(spec, w.fields), regionIds);
    if (!r.ok) {
      issues.push(...r.issues.map((i) => `overrides[${idx}].${i} (with ${on} it overrides)`));
      return;
    }
  }
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
  const issues: string[] = [];
  (set.wildcards ?? []).forEach((w, idx) => {
    checkWildcard(next, w, idx, undefined, issues);
  });
  if (set.overrides === undefined || set.overrides.size === 0) {
    if (issues.length > 0) throw new ConfigError(`policy ${tenant}/${resource}`, issues);
    return next;
  }
  const raws = new Map([...set.overrides].map(([k, o], idx) => [k, { ...o, idx }]));
  const overrides = mergeOverrides({ default: set.default, entries }, raws, undefined, issues);
  if (issues.length > 0) throw new ConfigError(`policy ${tenant}/${resource}`, issues);
  return { ...next, overrides };
}

/** Names that are stored as they are (docs/design.md §7); others are stored hashed. */
const PLAIN_NAME = KEY_PATTERN;

/**
 * How a lookup sees a key's names besides as given (docs/design.md §7, key hygiene). A check
 * names a key as the client sent it; Redis (and so the gossip daemon) knows it by its stored
 * names, hashed when outside [A-Za-z0-9_.-]. Both must land on the same policy:
 * - `stored`: the key's stored names; wildcard overrides match these (they equal the given
 *   names for plain keys). Default: the names given.
 * - `hashPart`: the stored form of a name (itself when plain); with it, a lookup by stored
 *   names finds policies and overrides named by the raw name (the daemon's lookups).
 */
export interface KeyNames {
  readonly stored?: { readonly tenant: string; readonly resource: string };
  readonly hashPart?: (part: string) => string;
}

const aliasCache = new WeakMap<PolicySet, { fn: (part: string) => string; map: Map<string, string> }>();

/** Stored key → the key as the set names it, for names that are stored hashed. */
function aliasesOf(set: PolicySet, hashPart: (part: string) => string): ReadonlyMap<string, string> {
  const hit = aliasCache.get(set);
  if (hit !== undefined && hit.fn === hashPart) return hit.map;
  const map = new Map<string, string>();
  const add = (k: string) => {
    const p = parseQuotaKey(k);
    if (p === undefined) return;
    const t = p.tenant === "*" || PLAIN_NAME.test(p.tenant) ? p.tenant : hashPart(p.tenant);
    const r = PLAIN_NAME.test(p.resource) ? p.resource : hashPart(p.resource);
    const stored = quotaKey(t, r);
    if (stored !== k) map.set(stored, k);
  };
  for (const k of set.entries.keys()) add(k);
  for (const k of set.overrides?.keys() ?? []) add(k);
  aliasCache.set(set, { fn: hashPart, map });
  return map;
}

const wildcardSpecs = new WeakMap<WildcardOverride, WeakMap<PolicySpec, PolicySpec | null>>();

/** A wildcard override on top of `base` (memoized); null: it makes no valid policy there. */
function wildcardOn(w: WildcardOverride, base: PolicySpec): PolicySpec | null {
  let m = wildcardSpecs.get(w);
  if (m === undefined) {
    m = new WeakMap();
    wildcardSpecs.set(w, m);
  }
  let spec = m.get(base);
  if (spec === undefined) {
    const r = parsePolicySpec(overrideInput(base, w.fields));
    spec = r.ok ? r.spec : null;
    m.set(base, spec);
  }
  return spec;
}

/** The first (most specific) wildcard override matching the key's stored names. */
export function wildcardOf(set: PolicySet, tenant: string, resource: string): WildcardOverride | undefined {
  for (const w of set.wildcards ?? [])
    if (globMatch(w.tenant, tenant) && globMatch(w.resource, resource)) return w;
  return undefined;
}

/**
 * The spec that applies: a limit the resource's name states (key-limits.ts, the RLS front
 * door), else exact (tenant, resource), then (*, resource), then the default; on top of it
 * the key's exact override, else the most specific matching wildcard override (more literal
 * characters, then fewer `*`, then the smaller key string; wildcardOrder).
 * `names`: how the key is also known (KeyNames); the daemon looks keys up by stored names.
 */
export function lookupPolicy(set: PolicySet, tenant: string, resource: string, names?: KeyNames): PolicySpec {
  const stated = keyLimitSpec(resource);
  if (stated !== undefined) return stated;
  const aliases = names?.hashPart !== undefined ? aliasesOf(set, names.hashPart) : undefined;
  const named = (k: string) => aliases?.get(k) ?? k;
  const key = named(quotaKey(tenant, resource));
  const exact = set.overrides?.get(key)?.spec;
  if (exact !== undefined) return exact;
  const base = set.entries.get(key) ?? set.entries.get(named(quotaKey("*", resource))) ?? set.default;
  if (set.wildcards === undefined) return base;
  const stored = names?.stored ?? { tenant, resource };
  const w = wildcardOf(set, stored.tenant, stored.resource);
  return (w !== undefined ? wildcardOn(w, base) : null) ?? base;
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

/** Options of the lookups by key: the region's floor, and how the key's names are known (KeyNames). */
export interface LookupOptions {
  readonly floorPpm?: number;
  readonly names?: KeyNames;
}
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
  options: LookupOptions = {},
): KeyPolicy {
  return keyPolicyOf(
    lookupPolicy(policies, tenant, resource, options.names),
    regions,
    regionId,
    tenant,
    resource,
    options,
  );
}

/** A key's policy in `regionId` from the spec that applies to it (resolvePolicy after the lookup). */
function keyPolicyOf(
  spec: PolicySpec,
  regions: readonly (string | { readonly id: string })[],
  regionId: string,
  tenant: string,
  resource: string,
  options: LookupOptions,
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
  options: LookupOptions,
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
  options: LookupOptions = {},
): ResolvedKey {
  if (sets.length === 0) throw new RangeError("resolveKey: no policy set");
  if (sets.length === 1) {
    // No rollout in progress (every check outside one): one lookup, no meet, no arrays.
    const set = sets[0] as PolicySet;
    const access = accessOf(set, tenant, resource);
    const spec = lookupPolicy(set, tenant, resource, options.names);
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
  const shadow = limiting.every((set) => lookupPolicy(set, tenant, resource, options.names).shadow === true);
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
  options: LookupOptions = {},
): KeyPolicy {
  return resolveKey(sets, regions, regionId, tenant, resource, options).policy;
}
