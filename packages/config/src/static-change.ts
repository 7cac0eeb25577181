// Which policy changes one process may apply alone (issue 21, bug 5). With
// `policy.replicated: false` and several regions, every region's limiters and
// daemon enforce their own copy of the policies file; Σ base shares ≤ U holds
// only while all copies agree on what sizes a key's slice. A change applied by
// one limiter process (an admin PUT) that moved a key's algorithm, capacity,
// rate, window, base share or floor would leave that process deciding from
// one bucket while its daemon lends from the file's (measured: 152 admitted
// against a bound of 109.8). Lists (allow, deny) and shadow mode size no slice
// and stay changeable.
import { quotaKey } from "@geoquota/core";
import { baseShares, lookupPolicy, type PolicySet, type PolicySpec } from "./policies.js";

export interface StaticChange {
  /** Where, and which field: e.g. `default.algorithm`, `policies.cust_a/api.capacity`. */
  readonly field: string;
  readonly message: string;
}

const SIZING = ["algorithm", "capacity", "refillPerSecond", "windowMs", "weights", "floorPpm"] as const;

function differs(
  a: PolicySpec,
  b: PolicySpec,
  regionIds: readonly string[],
): { field: string; from: unknown; to: unknown } | undefined {
  for (const f of SIZING) {
    if (f === "weights") {
      // What the weights decide is the base share of each region.
      const sa = baseShares(regionIds, a.weights);
      const sb = baseShares(regionIds, b.weights);
      if (regionIds.some((id) => sa[id] !== sb[id])) return { field: f, from: sa, to: sb };
      continue;
    }
    if (a[f] !== b[f]) return { field: f, from: a[f], to: b[f] };
  }
  return undefined;
}

function where(set: PolicySet, tenant: string, resource: string): string {
  const k = quotaKey(tenant, resource);
  if (set.overrides?.has(k) === true) return `overrides.${tenant}/${resource}`;
  return `policies.${tenant}/${resource}`;
}

/**
 * The first change of `after` against `before` that moves some key's slice,
 * or undefined when every key is sized as before in every region.
 */
export function sizingChange(
  before: PolicySet,
  after: PolicySet,
  regionIds: readonly string[],
): StaticChange | undefined {
  const say = (at: string, d: { field: string; from: unknown; to: unknown }): StaticChange => ({
    field: `${at}.${d.field}`,
    message: `${at}.${d.field}: ${JSON.stringify(d.from)} → ${JSON.stringify(d.to)} would change a region's slice, and without policy replication (policy.replicated: false) with ${regionIds.length} regions this process cannot apply it alone; change policies.json of every region together and restart them, or enable policy.replicated`,
  });
  const d = differs(before.default, after.default, regionIds);
  if (d !== undefined) return say("default", d);
  // Every key named anywhere, and each resource's default: a key named nowhere
  // resolves to (*, resource) or to the default, both covered.
  const keys = new Map<string, { tenant: string; resource: string }>();
  for (const set of [before, after]) {
    const named = [...set.entries.keys(), ...(set.overrides?.keys() ?? [])];
    for (const k of named) {
      const bar = k.indexOf("|");
      const tenant = k.slice(0, bar);
      const resource = k.slice(bar + 1);
      keys.set(k, { tenant, resource });
      keys.set(quotaKey("*", resource), { tenant: "*", resource });
    }
  }
  for (const k of [...keys.keys()].sort()) {
    const { tenant, resource } = keys.get(k) as { tenant: string; resource: string };
    const e = differs(
      lookupPolicy(before, tenant, resource),
      lookupPolicy(after, tenant, resource),
      regionIds,
    );
    if (e !== undefined) {
      const at = after.entries.has(k) || after.overrides?.has(k) === true ? after : before;
      return say(where(at, tenant, resource), e);
    }
  }
  return undefined;
}
