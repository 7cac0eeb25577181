// Policy documents (issue 15): one version of the whole policies file, as a
// region proposed it. Ids are (version, origin, digest), totally ordered:
// version first, then origin by string compare, then digest. Version 0 origin
// "seed" is the policies file a fresh cluster starts from.
//
// The digest (issue 21, DESIGN §3 "a version's id names its content") is a
// hash of the whole document, so two documents with one id and different
// content cannot exist: a proposer that lost an undurable proposal and numbers
// the next one (1, a) again makes a different id, and an ack or a completion
// of one content never counts for another. Every document that enters a
// region's state from outside (a peer's frame, a snapshot read back) is
// checked against its digest first (verifyDoc).
import { createHash } from "node:crypto";

/** The edit that last set a part of a document (entries.ts): its proposal's version, origin and id. */
export interface Stamp {
  readonly v: number;
  readonly o: string;
  readonly p: string;
}

export type Stamps = Readonly<Record<string, Stamp>>;

export interface DocId {
  readonly version: number;
  readonly origin: string;
  /** 32 hex digits: the first 128 bits of SHA-256 over the document's canonical JSON (docDigest). */
  readonly digest: string;
}

export interface PolicyDoc extends DocId {
  /** The proposer's id for it (admin API / SIGHUP), reported back by status. */
  readonly proposalId?: string;
  /** Wall-clock ms at the proposer; informational only. */
  readonly proposedAtMs: number;
  /** The raw policies file JSON (regions/policies.json shape); parsed by whoever enforces it. */
  readonly policies: unknown;
  /** Per part of the document, the edit that last set it (entries.ts); absent: the seed's. */
  readonly stamps?: Stamps;
}

export type DocContent = Omit<PolicyDoc, "digest">;

export const SEED_ORIGIN = "seed";
export const DIGEST_PATTERN = /^[0-9a-f]{32}$/;

export function compareIds(a: DocId, b: DocId): number {
  if (a.version !== b.version) return a.version < b.version ? -1 : 1;
  if (a.origin !== b.origin) return a.origin < b.origin ? -1 : 1;
  return a.digest < b.digest ? -1 : a.digest > b.digest ? 1 : 0;
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

/** Map key of an id: `<version>/<origin>/<digest>`. */
export function idKey(id: DocId): string {
  return `${id.version}/${id.origin}/${id.digest}`;
}

export function idOf(doc: DocId): DocId {
  return { version: doc.version, origin: doc.origin, digest: doc.digest };
}

/** `v<version>@<origin>#<first 8 digest digits>` (what logs and the CLI print). */
export function formatId(id: DocId | null): string {
  return id === null ? "none" : `v${id.version}@${id.origin}#${id.digest.slice(0, 8)}`;
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

/** The digest of a document's content: every field but the digest itself. */
export function docDigest(doc: DocContent): string {
  const content = {
    version: doc.version,
    origin: doc.origin,
    proposalId: doc.proposalId,
    proposedAtMs: doc.proposedAtMs,
    policies: doc.policies,
    stamps: doc.stamps,
  };
  return createHash("sha256").update(canonicalJson(content)).digest("hex").slice(0, 32);
}

/** A document with its digest. */
export function makeDoc(content: DocContent): PolicyDoc {
  return { ...content, digest: docDigest(content) };
}

/** An error naming the document when its digest does not match its content. */
export function verifyDoc(doc: PolicyDoc): string | undefined {
  const want = docDigest(doc);
  if (doc.digest === want) return undefined;
  return `policy v${doc.version}@${doc.origin}: digest: ${doc.digest} does not match its content (${want})`;
}

export function seedDoc(policies: unknown): PolicyDoc {
  return makeDoc({ version: 0, origin: SEED_ORIGIN, proposedAtMs: 0, policies });
}

/** The id of the seed document of a policies file. */
export function seedId(policies: unknown): DocId {
  return idOf(seedDoc(policies));
}
