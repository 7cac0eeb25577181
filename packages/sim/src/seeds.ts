// Seed selection and replay. A failing seed is reported in the thrown error
// (never on the console: stray output fails tests here), and
// GQ_SEED=<n> replays exactly that seed; GQ_SIM_LONG=1 runs many more seeds.

export type Env = Readonly<Record<string, string | undefined>>;

export interface SeedPlan {
  /** Seeds in the normal run. */
  count: number;
  /** Seeds in long mode (GQ_SIM_LONG=1). Defaults to 20 × count. */
  longCount?: number;
  /** First seed; seeds are consecutive from it. Default 1. */
  firstSeed?: number;
  /** Where to read GQ_SEED / GQ_SIM_LONG; defaults to process.env. */
  env?: Env;
}

export const SEED_ENV = "GQ_SEED";
export const LONG_ENV = "GQ_SIM_LONG";

function defaultEnv(): Env {
  const proc = (globalThis as { process?: { env?: Env } }).process;
  return proc?.env ?? {};
}

/** True when the long mode is requested. */
export function isLongMode(env: Env = defaultEnv()): boolean {
  const v = env[LONG_ENV];
  return v !== undefined && v !== "" && v !== "0" && v !== "false";
}

/** The seeds a run should use: only GQ_SEED if set, else count (or longCount) consecutive seeds. */
export function seedsToRun(plan: SeedPlan): number[] {
  const env = plan.env ?? defaultEnv();
  const replay = env[SEED_ENV];
  if (replay !== undefined && replay !== "") {
    const seed = Number(replay);
    if (!Number.isSafeInteger(seed)) throw new RangeError(`${SEED_ENV} must be an integer, got "${replay}"`);
    return [seed];
  }
  const first = plan.firstSeed ?? 1;
  const n = isLongMode(env) ? (plan.longCount ?? plan.count * 20) : plan.count;
  return Array.from({ length: n }, (_, i) => first + i);
}

export class SeedFailure extends Error {
  override readonly name = "SeedFailure";
  readonly seed: number;
  constructor(label: string, seed: number, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`${label} failed with seed ${seed}; replay with ${SEED_ENV}=${seed}\n${why}`, { cause });
    this.seed = seed;
  }
}

/**
 * Runs body once per seed. The first failure is rethrown as a SeedFailure
 * whose message names the seed and the replay variable.
 */
export function runSeeds(label: string, plan: SeedPlan, body: (seed: number) => void): number {
  const seeds = seedsToRun(plan);
  for (const seed of seeds) {
    try {
      body(seed);
    } catch (err) {
      throw new SeedFailure(label, seed, err);
    }
  }
  return seeds.length;
}

/** runSeeds for an async body: seeds run one after another, the first failure is rethrown as a SeedFailure. */
export async function runSeedsAsync(
  label: string,
  plan: SeedPlan,
  body: (seed: number) => Promise<void>,
): Promise<number> {
  const seeds = seedsToRun(plan);
  for (const seed of seeds) {
    try {
      await body(seed);
    } catch (err) {
      throw new SeedFailure(label, seed, err);
    }
  }
  return seeds.length;
}
