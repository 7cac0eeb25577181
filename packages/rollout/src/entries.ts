// Per-entry edits of a policies document (issue 22, DESIGN §3 "concurrent
// edits of different entries made in different regions must all survive").
//
// A document is a map of parts: one per policies entry (`policies:<tenant>/<resource>`),
// and `default`, `overrides`, `allow`, `deny` whole. Every document carries,
// per part, the stamp of the edit that last set it (absent: the seed's). A
// stamp is (version, origin, proposalId) of the proposal that made the edit,
// ordered in that order. Merging two documents takes each part from the side
// with the higher stamp (a last-writer-wins map, so the merge is commutative,
// associative and idempotent); a part removed keeps its stamp (a tombstone),
// so a removal is merged like any other edit.
//
// The daemon applies it: an edit is proposed on top of the region's newest
// known document, stamping only the parts it changed; when the newest document
// does not reflect some other known document (a concurrent edit made in
// another region), the region proposes their merge. A region acks only a
// target that reflects every document it knows, so no version completes
// (and prunes) before every concurrent edit is in it.
import { canonicalJson, type PolicyDoc, type Stamp, type Stamps } from "./doc.js";

export type { Stamp, Stamps };

export function compareStamps(a: Stamp | undefined, b: Stamp | undefined): number {
  if (a === undefined) return b === undefined ? 0 : -1;
  if (b === undefined) return 1;
  if (a.v !== b.v) return a.v < b.v ? -1 : 1;
  if (a.o !== b.o) return a.o < b.o ? -1 : 1;
  return a.p < b.p ? -1 : a.p > b.p ? 1 : 0;
}

const WHOLE = ["default", "overrides", "allow", "deny"] as const;

/**
 * The part of one entry. Names may hold `/` (any key the check API takes, except `|`): then
 * `|` separates them, so `a/b` + `c` and `a` + `b/c` are two parts; names without `/` keep
 * the `tenant/resource` form (a part holds `|` only in the other form, and never both).
 */
export function entryPart(tenant: string, resource: string): string {
  return tenant.includes("/") || resource.includes("/")
    ? `policies:${tenant}|${resource}`
    : `policies:${tenant}/${resource}`;
}

/** The parts of a policies document (raw JSON); an absent part is undefined. */
export function partsOf(policies: unknown): Map<string, unknown> {
  const doc = (policies ?? {}) as Record<string, unknown>;
  const out = new Map<string, unknown>();
  for (const k of WHOLE) {
    const v = doc[k];
    // An empty list is the same document as no list.
    if (v !== undefined && !(Array.isArray(v) && v.length === 0)) out.set(k, v);
  }
  const list = Array.isArray(doc.policies) ? (doc.policies as Record<string, unknown>[]) : [];
  for (const e of list) out.set(entryPart(String(e.tenant), String(e.resource)), e);
  return out;
}

/** A policies document from its parts (entries sorted by part, so equal parts give equal documents). */
export function assemble(parts: ReadonlyMap<string, unknown>): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  for (const k of WHOLE) if (parts.get(k) !== undefined) doc[k] = parts.get(k);
  const entries = [...parts.keys()].filter((k) => k.startsWith("policies:")).sort();
  doc.policies = entries.map((k) => parts.get(k)).filter((e) => e !== undefined);
  return doc;
}

/** The parts whose content differs between two documents. */
export function changedParts(before: unknown, after: unknown): string[] {
  const a = partsOf(before);
  const b = partsOf(after);
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((k) => canonicalJson(a.get(k)) !== canonicalJson(b.get(k))).sort();
}

/** `base`'s stamps with `stamp` on every part that `next` changes. */
export function stampEdit(base: PolicyDoc, next: unknown, stamp: Stamp): Stamps {
  const out: Record<string, Stamp> = { ...(base.stamps ?? {}) };
  for (const k of changedParts(base.policies, next)) out[k] = stamp;
  return out;
}

/** Every edit `d` holds is in `t` (or superseded there by a higher stamp). */
export function reflects(t: PolicyDoc, d: PolicyDoc): boolean {
  const ts = t.stamps ?? {};
  for (const [k, s] of Object.entries(d.stamps ?? {})) if (compareStamps(ts[k], s) < 0) return false;
  return true;
}

/**
 * The merge of documents: each part from the document with its highest stamp
 * (equal stamps are one edit, hence one content: the earliest listed keeps it).
 */
export function mergeParts(docs: readonly PolicyDoc[]): {
  policies: Record<string, unknown>;
  stamps: Stamps;
} {
  const partsByDoc = docs.map((d) => partsOf(d.policies));
  const keys = new Set<string>();
  docs.forEach((d, i) => {
    for (const k of (partsByDoc[i] as Map<string, unknown>).keys()) keys.add(k);
    for (const k of Object.keys(d.stamps ?? {})) keys.add(k);
  });
  const parts = new Map<string, unknown>();
  const stamps: Record<string, Stamp> = {};
  for (const k of keys) {
    let win = 0;
    for (let i = 1; i < docs.length; i++)
      if (compareStamps(docs[i]?.stamps?.[k], docs[win]?.stamps?.[k]) > 0) win = i;
    const s = docs[win]?.stamps?.[k];
    if (s !== undefined) stamps[k] = s;
    const v = partsByDoc[win]?.get(k);
    if (v !== undefined) parts.set(k, v);
  }
  return { policies: assemble(parts), stamps };
}
