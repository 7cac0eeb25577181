// Positive-negative counter: two G-Counters. In geoquota `p` is admitted cost
// and `n` refunded/returned cost (Redis fields `p|<replica>`, `n|<replica>`).
import type { Result } from "./errors.js";
import { GCounter } from "./gcounter.js";

export interface PNCounter {
  p: GCounter;
  n: GCounter;
}

function initial(): PNCounter {
  return { p: new Map(), n: new Map() };
}

function increment(state: PNCounter, replica: string, amount: number): Result<PNCounter> {
  const d = GCounter.increment(state.p, replica, amount);
  return d.ok ? { ok: true, value: { p: d.value, n: new Map() } } : d;
}

function decrement(state: PNCounter, replica: string, amount: number): Result<PNCounter> {
  const d = GCounter.increment(state.n, replica, amount);
  return d.ok ? { ok: true, value: { p: new Map(), n: d.value } } : d;
}

/** In place; the changing entries also go into `delta` when given (GCounter.mergeInto). */
function mergeInto(target: PNCounter, src: PNCounter, delta?: PNCounter): boolean {
  const p = GCounter.mergeInto(target.p, src.p, delta?.p);
  const n = GCounter.mergeInto(target.n, src.n, delta?.n);
  return p || n;
}

function join(a: PNCounter, b: PNCounter): PNCounter {
  return { p: GCounter.join(a.p, b.p), n: GCounter.join(a.n, b.n) };
}

function leq(a: PNCounter, b: PNCounter): boolean {
  return GCounter.leq(a.p, b.p) && GCounter.leq(a.n, b.n);
}

function equals(a: PNCounter, b: PNCounter): boolean {
  return GCounter.equals(a.p, b.p) && GCounter.equals(a.n, b.n);
}

/** Σ increments − Σ decrements. */
function value(state: PNCounter): number {
  return GCounter.value(state.p) - GCounter.value(state.n);
}

/** One region's net value (its increments − its decrements, all incarnations). */
function regionTotal(state: PNCounter, region: string): number {
  return GCounter.regionTotal(state.p, region) - GCounter.regionTotal(state.n, region);
}

/** Per-region net values. */
function regionTotals(state: PNCounter): Map<string, number> {
  const out = GCounter.regionTotals(state.p);
  for (const [region, v] of GCounter.regionTotals(state.n)) out.set(region, (out.get(region) ?? 0) - v);
  return out;
}

export const PNCounter = {
  initial,
  increment,
  decrement,
  join,
  mergeInto,
  leq,
  equals,
  value,
  regionTotal,
  regionTotals,
} as const;
