// How much longer growth must wait when a rollout changes a window algorithm
// (docs/design.md §3.5, trap 8). A window algorithm cannot take back what a
// region already admitted in the current window, so a limit that grows in the
// middle of a window adds to what the other regions admitted under the old
// split (base 3/4 + 1/4 → 1/2 + 1/2 mid-window: 75 + 25 + 25 = 125 > 100).
// Growth (completion) already waits D + 2ε after every region acknowledged,
// i.e. after every region enforces the new document; waiting one window W
// (+ 2ε, the clock offset between regions) more puts every admission made
// under an old, larger slice in an earlier window than any admission under the
// grown one. The rate algorithms are unaffected (their tokens are clamped), so
// a document whose window-algorithm keys resolve as before waits nothing more.
import {
  type Algorithm,
  lookupPolicy,
  type PolicySet,
  type PolicySpec,
  parseQuotaKey,
} from "@geoquota/config";

const WINDOW_ALGORITHMS: ReadonlySet<Algorithm> = new Set(["fixed_window", "sliding_window", "sliding_log"]);
/** parsePolicies' default window (the policy's `windowMs` when absent). */
const DEFAULT_WINDOW_MS = 1000;

const isWindow = (s: PolicySpec): boolean => WINDOW_ALGORITHMS.has(s.algorithm);
const windowMsOf = (s: PolicySpec): number => s.windowMs ?? DEFAULT_WINDOW_MS;

function sameWeights(a: PolicySpec["weights"], b: PolicySpec["weights"]): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => a[k] === b[k]);
}

/** Every field that shapes a key's slice (shadow too: turning it on lifts the limit). */
function sameSpec(a: PolicySpec, b: PolicySpec): boolean {
  return (
    a.algorithm === b.algorithm &&
    a.capacity === b.capacity &&
    a.refillPerSecond === b.refillPerSecond &&
    windowMsOf(a) === windowMsOf(b) &&
    sameWeights(a.weights, b.weights) &&
    a.floorPpm === b.floorPpm &&
    (a.shadow ?? false) === (b.shadow ?? false)
  );
}

function allSpecs(set: PolicySet): PolicySpec[] {
  return [set.default, ...set.entries.values(), ...[...(set.overrides?.values() ?? [])].map((o) => o.spec)];
}

/**
 * The longest window (ms) of a key that resolves to a window algorithm in
 * `older` or `newer` and resolves differently in the two; 0 when there is none.
 * Keys are the ones either document names (entries, overrides) plus an
 * unnamed tenant per named resource and an unnamed key (the defaults): every
 * other key resolves exactly as one of those. An override key with a `*` (a
 * pattern, not one key) makes that enumeration unsure: then every window
 * algorithm of either document counts.
 */
export function windowChangeMs(older: PolicySet, newer: PolicySet): number {
  const sets = [older, newer];
  const patterns = sets.some((s) => [...(s.overrides?.keys() ?? [])].some((k) => k.includes("*")));
  if (patterns) {
    let worst = 0;
    for (const s of sets)
      for (const spec of allSpecs(s)) if (isWindow(spec)) worst = Math.max(worst, windowMsOf(spec));
    return worst;
  }
  const keys: { tenant: string; resource: string }[] = [{ tenant: "*", resource: "\u0000" }];
  for (const s of sets) {
    for (const k of [...s.entries.keys(), ...(s.overrides?.keys() ?? [])]) {
      const q = parseQuotaKey(k);
      if (q === undefined) continue;
      keys.push(q, { tenant: "*", resource: q.resource });
    }
  }
  let worst = 0;
  for (const { tenant, resource } of keys) {
    const a = lookupPolicy(older, tenant, resource);
    const b = lookupPolicy(newer, tenant, resource);
    if ((!isWindow(a) && !isWindow(b)) || sameSpec(a, b)) continue;
    if (isWindow(a)) worst = Math.max(worst, windowMsOf(a));
    if (isWindow(b)) worst = Math.max(worst, windowMsOf(b));
  }
  return worst;
}
