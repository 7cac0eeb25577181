// Seeded PRNG for deterministic simulations: sfc32 (small, fast, passes
// PractRand to 2^40+), seeded through splitmix32 so nearby seeds (1, 2, 3...)
// still give unrelated streams. Never Math.random: a run must replay from its seed.

/** Mixes a 32-bit seed into a well-spread 32-bit value (splitmix32). */
function splitmix32(state: number): number {
  let z = (state + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export class Rng {
  readonly seed: number;
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`Rng seed must be a safe integer, got ${seed}`);
    this.seed = seed;
    // Fold the high bits in so seeds above 2^32 differ too.
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 2 ** 32) >>> 0;
    this.a = splitmix32(lo);
    this.b = splitmix32(this.a ^ hi);
    this.c = splitmix32(this.b);
    this.d = 1;
    // Discard the first outputs: sfc32 needs a few rounds to diffuse the seed.
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform float in [lo, hi). */
  floatIn(lo: number, hi: number): number {
    return lo + (hi - lo) * this.float();
  }

  /** Uniform integer in [lo, hi] (both inclusive). */
  int(lo: number, hi: number): number {
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || hi < lo) {
      throw new RangeError(`Rng.int needs integers lo <= hi, got [${lo}, ${hi}]`);
    }
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return p > 0 && this.float() < p;
  }

  /** A uniformly chosen element. Throws on an empty array (a test bug). */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("Rng.pick on an empty array");
    return items[Math.floor(this.float() * items.length)] as T;
  }

  /** Fisher–Yates in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }

  /** Exponentially distributed value with the given mean. */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.float());
  }

  /** An independent generator derived from this one (for per-component streams). */
  fork(): Rng {
    return new Rng(this.nextUint32() * 2 ** 20 + (this.nextUint32() >>> 12));
  }
}

/**
 * A stable sub-seed from a seed and a name (FNV-1a style over the name's UTF-16 units), so one
 * named part of a run (a chaos scenario, a soak's plan) does not depend on which others ran.
 */
export function subSeed(seed: number, name: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}
