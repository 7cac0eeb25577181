// What `geoquota policy diff FILE` prints: the changes between the policies a
// cluster runs (the target version's document) and a policies file, entry by
// entry (`tenant/resource`), the rest of the document (default, lists,
// overrides) field by field. Compared after canonical key order, so a file
// that only reorders keys has no changes.

export interface PolicyChange {
  readonly kind: "added" | "removed" | "changed";
  /** `policies[tenant/resource]` or a top-level field name. */
  readonly path: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function canonical(v: unknown): Json {
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === "object") {
    const out: Record<string, Json> = {};
    for (const k of Object.keys(v).sort()) out[k] = canonical((v as Record<string, unknown>)[k]);
    return out;
  }
  return v as Json;
}

const same = (a: unknown, b: unknown): boolean =>
  JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

function entries(doc: Record<string, unknown>): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  const list = Array.isArray(doc.policies) ? doc.policies : [];
  for (const p of list as Record<string, unknown>[]) {
    const { tenant, resource, ...spec } = p;
    out.set(`${String(tenant)}/${String(resource)}`, spec);
  }
  return out;
}

/** The changes that turn `before` into `after` (both policies documents). */
export function diffPolicies(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): PolicyChange[] {
  const changes: PolicyChange[] = [];
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((k) => k !== "policies")
    .sort();
  for (const f of fields) {
    const [b, a] = [before[f], after[f]];
    if (b === undefined) changes.push({ kind: "added", path: f, after: a });
    else if (a === undefined) changes.push({ kind: "removed", path: f, before: b });
    else if (!same(b, a)) changes.push({ kind: "changed", path: f, before: b, after: a });
  }
  const [eb, ea] = [entries(before), entries(after)];
  for (const k of [...new Set([...eb.keys(), ...ea.keys()])].sort()) {
    const [b, a] = [eb.get(k), ea.get(k)];
    const path = `policies[${k}]`;
    if (b === undefined) changes.push({ kind: "added", path, after: a });
    else if (a === undefined) changes.push({ kind: "removed", path, before: b });
    else if (!same(b, a)) changes.push({ kind: "changed", path, before: b, after: a });
  }
  return changes;
}

/** One line per change: `+ path after`, `- path before`, `~ path before -> after`. */
export function formatChanges(changes: readonly PolicyChange[]): string {
  if (changes.length === 0) return "no changes\n";
  const j = (v: unknown) => JSON.stringify(canonical(v));
  return changes
    .map((c) =>
      c.kind === "added"
        ? `+ ${c.path} ${j(c.after)}\n`
        : c.kind === "removed"
          ? `- ${c.path} ${j(c.before)}\n`
          : `~ ${c.path} ${j(c.before)} -> ${j(c.after)}\n`,
    )
    .join("");
}
