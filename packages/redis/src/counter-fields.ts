// The CRDT counter fields of a key as inspect.lua reports them (lua/lib/keep.lua:
// this region's own replica from P:b's record, the others P:b's named fields):
// `p|<replica>` admitted cost, `n|<replica>` refunded or returned cost,
// `d|<replica>` denied cost. The only TypeScript place that knows the
// prefixes; everything above the Redis package reads and writes counters by kind.

/** A key's CRDT counters by kind, each replica id → value. */
export interface CounterSets {
  readonly admitted: Readonly<Record<string, number>>;
  readonly refunded: Readonly<Record<string, number>>;
  readonly denied: Readonly<Record<string, number>>;
}

/** The counters by kind of a counter hash's fields (fields of another kind are skipped). */
export function counterSetsOf(fields: Iterable<readonly [string, number]>): CounterSets {
  const admitted: Record<string, number> = {};
  const refunded: Record<string, number> = {};
  const denied: Record<string, number> = {};
  for (const [f, n] of fields) {
    const replica = f.slice(2);
    if (f.startsWith("p|")) admitted[replica] = n;
    else if (f.startsWith("n|")) refunded[replica] = n;
    else if (f.startsWith("d|")) denied[replica] = n;
  }
  return { admitted, refunded, denied };
}

/** The counter hash's fields of counters by kind (what loan_merge.lua takes). */
export function counterFieldsOf(sets: CounterSets): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const [replica, n] of Object.entries(sets.admitted)) fields[`p|${replica}`] = n;
  for (const [replica, n] of Object.entries(sets.refunded)) fields[`n|${replica}`] = n;
  for (const [replica, n] of Object.entries(sets.denied)) fields[`d|${replica}`] = n;
  return fields;
}
