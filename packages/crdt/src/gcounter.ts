// Grow-only counter keyed by replica id (delta-state, Almeida et al.).
// State: replica → that replica's running total. Join: per-entry max, so a
// replica that lost its counters re-learns them from peers (DESIGN §4).
// States are plain Maps; `join` is pure, `mergeInto` mutates its target and
// is the allocation-free path used on gossip receipt.
import { err, ok, type Result } from "./errors.js";
import { checkId, regionOfReplica } from "./ids.js";

export type GCounter = Map<string, number>;

export function isValidAmount(amount: unknown): amount is number {
  return typeof amount === "number" && Number.isFinite(amount) && amount >= 0;
}

function initial(): GCounter {
  return new Map();
}

/** The delta that adds amount to replica's entry; an invalid amount is an error value and changes nothing. */
function increment(state: ReadonlyMap<string, number>, replica: string, amount: number): Result<GCounter> {
  const badId = checkId(replica, "replica");
  if (badId !== undefined) return { ok: false, error: badId };
  if (!isValidAmount(amount)) return err("GQ_ERR_INVALID_AMOUNT", `amount ${amount} must be finite and >= 0`);
  const next = (state.get(replica) ?? 0) + amount;
  // A huge finite amount can still overflow the sum to Infinity.
  if (!Number.isFinite(next)) return err("GQ_ERR_INVALID_AMOUNT", `total for ${replica} would overflow`);
  return ok(new Map([[replica, next]]));
}

/**
 * Merges src into target in place (per-entry max). Returns true if target changed; the entries
 * that changed it are also set in `delta` when given (the smallest δ with old ⊔ δ = new).
 */
function mergeInto(target: GCounter, src: ReadonlyMap<string, number>, delta?: GCounter): boolean {
  let changed = false;
  for (const [replica, v] of src) {
    const cur = target.get(replica);
    if (cur === undefined || v > cur) {
      target.set(replica, v);
      delta?.set(replica, v);
      changed = true;
    }
  }
  return changed;
}

function join(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): GCounter {
  const out = new Map(a);
  mergeInto(out, b);
  return out;
}

/** a ≤ b in the lattice order (every entry of a is ≤ b's). */
function leq(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  for (const [replica, v] of a) {
    if (v > (b.get(replica) ?? 0)) return false;
  }
  return true;
}

function equals(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [replica, v] of a) {
    if (b.get(replica) !== v) return false;
  }
  return true;
}

function value(state: ReadonlyMap<string, number>): number {
  let sum = 0;
  for (const v of state.values()) sum += v;
  return sum;
}

/** Sum of one region's entries (all its incarnations). */
function regionTotal(state: ReadonlyMap<string, number>, region: string): number {
  let sum = 0;
  for (const [replica, v] of state) {
    if (regionOfReplica(replica) === region) sum += v;
  }
  return sum;
}

/** Per-region sums: region → Σ of its replicas' entries. */
function regionTotals(state: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [replica, v] of state) {
    const region = regionOfReplica(replica);
    out.set(region, (out.get(region) ?? 0) + v);
  }
  return out;
}

export const GCounter = {
  initial,
  increment,
  join,
  mergeInto,
  leq,
  equals,
  value,
  regionTotal,
  regionTotals,
} as const;
