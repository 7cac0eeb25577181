// The replicated map: key `tenant|resource` → KeyRecord, joined per key.
import type { LoanConflict } from "./loans.js";
import { KeyRecord } from "./record.js";

export type CrdtMap = Map<string, KeyRecord>;

function initial(): CrdtMap {
  return new Map();
}

/** Merges a record (delta or full) for one key into the map in place; true if it changed. */
function mergeKeyInto(map: CrdtMap, key: string, record: KeyRecord, conflicts?: LoanConflict[]): boolean {
  const cur = map.get(key);
  if (cur === undefined) {
    if (KeyRecord.isEmpty(record)) return false;
    // Copy: the caller may keep (and later mutate) the delta it passed in.
    map.set(key, KeyRecord.copy(record));
    return true;
  }
  return KeyRecord.mergeInto(cur, record, conflicts);
}

/**
 * mergeKeyInto that returns what changed the map: null when nothing did, else the smallest
 * record δ with old ⊔ δ = new (a new key: a copy of the whole record). Shipping δ instead of
 * `record` carries only the entries a peer can be missing.
 */
function mergeKeyDelta(
  map: CrdtMap,
  key: string,
  record: KeyRecord,
  conflicts?: LoanConflict[],
): KeyRecord | null {
  const cur = map.get(key);
  if (cur === undefined) {
    if (KeyRecord.isEmpty(record)) return null;
    map.set(key, KeyRecord.copy(record));
    return KeyRecord.copy(record);
  }
  const delta = KeyRecord.initial();
  return KeyRecord.mergeInto(cur, record, conflicts, delta) ? delta : null;
}

function mergeInto(
  target: CrdtMap,
  src: ReadonlyMap<string, KeyRecord>,
  conflicts?: LoanConflict[],
): boolean {
  let changed = false;
  for (const [key, record] of src) {
    if (mergeKeyInto(target, key, record, conflicts)) changed = true;
  }
  return changed;
}

function copy(map: ReadonlyMap<string, KeyRecord>): CrdtMap {
  const out = new Map<string, KeyRecord>();
  for (const [key, record] of map) out.set(key, KeyRecord.copy(record));
  return out;
}

function join(
  a: ReadonlyMap<string, KeyRecord>,
  b: ReadonlyMap<string, KeyRecord>,
  conflicts?: LoanConflict[],
): CrdtMap {
  const out = copy(a);
  mergeInto(out, b, conflicts);
  return out;
}

function leq(a: ReadonlyMap<string, KeyRecord>, b: ReadonlyMap<string, KeyRecord>): boolean {
  for (const [key, record] of a) {
    const other = b.get(key);
    if (other === undefined ? !KeyRecord.isEmpty(record) : !KeyRecord.leq(record, other)) return false;
  }
  return true;
}

/** Equal as lattice values: an absent key equals an empty record. */
function equals(a: ReadonlyMap<string, KeyRecord>, b: ReadonlyMap<string, KeyRecord>): boolean {
  return leq(a, b) && leq(b, a);
}

export const CrdtMap = { initial, mergeKeyInto, mergeKeyDelta, mergeInto, copy, join, leq, equals } as const;
