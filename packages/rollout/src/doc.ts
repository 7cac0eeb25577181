// Policy documents (issue 15): one version of the whole policies file, as a
// region proposed it. Ids are (version, origin), totally ordered: version
// first, then origin by string compare. Version 0 origin "seed" is the
// policies file a fresh cluster starts from.

export interface DocId {
  readonly version: number;
  readonly origin: string;
}

export interface PolicyDoc extends DocId {
  /** The proposer's id for it (admin API / SIGHUP), reported back by status. */
  readonly proposalId?: string;
  /** Wall-clock ms at the proposer; informational only. */
  readonly proposedAtMs: number;
  /** The raw policies file JSON (regions/policies.json shape); parsed by whoever enforces it. */
  readonly policies: unknown;
}

export const SEED_ORIGIN = "seed";
export const SEED_ID: DocId = { version: 0, origin: SEED_ORIGIN };

export function compareIds(a: DocId, b: DocId): number {
  if (a.version !== b.version) return a.version < b.version ? -1 : 1;
  return a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0;
}

/** null sorts below every id. */
export function compareMaybeIds(a: DocId | null, b: DocId | null): number {
  if (a === null) return b === null ? 0 : -1;
  if (b === null) return 1;
  return compareIds(a, b);
}

export function sameId(a: DocId | null, b: DocId | null): boolean {
  return compareMaybeIds(a, b) === 0;
}

/** Map key of an id: `<version>/<origin>`. */
export function idKey(id: DocId): string {
  return `${id.version}/${id.origin}`;
}

export function idOf(doc: DocId): DocId {
  return { version: doc.version, origin: doc.origin };
}

export function formatId(id: DocId | null): string {
  return id === null ? "none" : `v${id.version}@${id.origin}`;
}

/** Canonical JSON (object keys sorted): equal policies give equal strings. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

/**
 * Two documents with one id (only possible after a proposer lost all its
 * state, or seeds from different files): a deterministic choice, so that
 * merge stays commutative and every region keeps the same one.
 */
export function preferDoc(a: PolicyDoc, b: PolicyDoc): PolicyDoc {
  const ka = canonicalJson(a);
  const kb = canonicalJson(b);
  return ka >= kb ? a : b;
}

export function seedDoc(policies: unknown): PolicyDoc {
  return { version: 0, origin: SEED_ORIGIN, proposedAtMs: 0, policies };
}
