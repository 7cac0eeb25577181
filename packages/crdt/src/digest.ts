// Anti-entropy digests: a 32-bit FNV-1a hash per key over a canonical text of
// its record. Two replicas whose hashes differ for a key push each other their
// full record for it (join is idempotent, so pushing more than needed is only
// bandwidth). Keys are split into buckets by hash(key) so a large map can be
// compared one bucket per frame.
import type { Loan, ReturnedMark } from "./loans.js";
import type { KeyRecord } from "./record.js";

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a over UTF-16 code units (ids and keys are ASCII, so this equals the byte version). */
export function fnv1a32(text: string, seed = FNV_OFFSET): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

function counterText(tag: string, m: ReadonlyMap<string, number>): string {
  const ids = [...m.keys()].sort();
  let out = tag;
  for (const id of ids) out += `${id}=${m.get(id)};`;
  return out;
}

/**
 * Canonical text of a record: parts in fixed order, entries sorted by id,
 * numbers in JavaScript's shortest round-trip form. Documented in README so
 * another implementation can reproduce the hash.
 */
export function canonicalRecordText(r: KeyRecord): string {
  let out = counterText("p:", r.consumed.p) + counterText("n:", r.consumed.n) + counterText("d:", r.denied);
  out += "l:";
  for (const k of [...r.loans.keys()].sort()) {
    const l = r.loans.get(k) as Loan;
    out += `${k}=${l.units},${l.deadlineUs},${l.seq};`;
  }
  out += "r:";
  for (const k of [...r.returned.keys()].sort()) {
    out += `${k}=${(r.returned.get(k) as ReturnedMark).seq};`;
  }
  return out;
}

export function recordHash(r: KeyRecord): number {
  return fnv1a32(canonicalRecordText(r));
}

export function bucketOf(key: string, bucketCount: number): number {
  return bucketCount <= 1 ? 0 : fnv1a32(key) % bucketCount;
}

export interface DigestScope {
  bucket: number;
  bucketCount: number;
}

const WHOLE: DigestScope = { bucket: 0, bucketCount: 1 };

/** key → record hash for the keys of one bucket (default: all keys). */
export function computeDigest(
  map: ReadonlyMap<string, KeyRecord>,
  scope: DigestScope = WHOLE,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, record] of map) {
    if (bucketOf(key, scope.bucketCount) === scope.bucket) out.set(key, recordHash(record));
  }
  return out;
}

/**
 * Keys of the given bucket that the digest's sender lacks or holds
 * differently: push our full record for each. Keys only the sender has are
 * its to push when it receives our digest.
 */
export function keysToRepair(
  map: ReadonlyMap<string, KeyRecord>,
  remote: ReadonlyMap<string, number>,
  scope: DigestScope = WHOLE,
): string[] {
  const out: string[] = [];
  for (const [key, record] of map) {
    if (bucketOf(key, scope.bucketCount) !== scope.bucket) continue;
    if (remote.get(key) !== recordHash(record)) out.push(key);
  }
  return out;
}
