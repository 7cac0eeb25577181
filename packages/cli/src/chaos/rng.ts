// A seeded PRNG (mulberry32): the seed alone fixes a run's traffic split,
// fault targets and timings, so a failing run replays from its printed seed.
// 32-bit state is plenty for choosing faults; it is not for cryptography.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  /** A fresh generator derived from this one (a sub-seed per scenario). */
  fork(): Rng;
}

export function createRng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const rng: Rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (items) => {
      if (items.length === 0) throw new Error("pick from an empty list");
      return items[Math.floor(next() * items.length)]!;
    },
    fork: () => createRng(Math.floor(next() * 2 ** 31)),
  };
  return rng;
}

/** Derives a stable sub-seed from a seed and a name, so one scenario's plan does not depend on which others ran. */
export function subSeed(seed: number, name: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}
