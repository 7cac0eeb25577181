// Limits carried in a key's name (DESIGN §11): the RLS front door turns an
// envoyproxy/ratelimit rule, or a descriptor's own `limit` override, into a
// resource whose name states the limit, e.g. `rls.fw.50.second.<hash>`. Every
// process that resolves the key — each region's limiter, its gossip daemon,
// every version of a policy rollout — derives the same spec from the name
// alone, so a limit that arrives in a request has the same share and lease
// rules as one in the policies file without being replicated first.
// The spec is written out here (policies.ts imports this module; no cycle back). It is a
// PolicySpec of policies.ts.
interface PolicySpec {
  readonly algorithm: "fixed_window" | "token_bucket";
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly windowMs?: number;
  readonly shadow?: boolean;
}

/** envoyproxy/ratelimit's units and their seconds (its utils.UnitToDivider: a month is 30 days, a year 365). */
export const RLS_UNITS = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 7 * 86_400,
  month: 30 * 86_400,
  year: 365 * 86_400,
} as const;

export type RlsUnit = keyof typeof RLS_UNITS;

/** fw: epoch-aligned fixed window per unit (envoyproxy/ratelimit's counters); tb: geoquota's token bucket. */
export type RlsAlgorithm = "fw" | "tb";

export interface KeyLimit {
  readonly algorithm: RlsAlgorithm;
  readonly requestsPerUnit: number;
  readonly unit: RlsUnit;
  /** Token bucket only: capacity (default requestsPerUnit). */
  readonly burst?: number;
  readonly shadow?: boolean;
}

const UINT32_MAX = 4_294_967_295;
const KEY_LIMIT =
  /^rls\.(fw|tb)\.([1-9][0-9]{0,9})\.(second|minute|hour|day|week|month|year)(?:\.b([1-9][0-9]{0,9}))?(\.shadow)?\.[0-9a-f]{8,64}$/;

/**
 * The resource name of a counter under `limit`; `id` (lower-case hex) tells counters of one
 * limit apart. requestsPerUnit ≥ 1 (a limit of 0 never reaches the store).
 */
export function keyLimitResource(limit: KeyLimit, id: string): string {
  const n = limit.requestsPerUnit;
  if (!Number.isInteger(n) || n < 1 || n > UINT32_MAX) throw new RangeError(`requestsPerUnit ${n}`);
  if (
    limit.burst !== undefined &&
    (limit.algorithm !== "tb" || !Number.isInteger(limit.burst) || limit.burst < 1)
  ) {
    throw new RangeError(`burst ${limit.burst} (token bucket only, integer ≥ 1)`);
  }
  if (!/^[0-9a-f]{8,64}$/.test(id)) throw new RangeError(`id ${id}: expected 8-64 lower-case hex digits`);
  const b = limit.burst !== undefined ? `.b${limit.burst}` : "";
  const s = limit.shadow === true ? ".shadow" : "";
  return `rls.${limit.algorithm}.${n}.${limit.unit}${b}${s}.${id}`;
}

/** The spec a key-limit resource states, or undefined when the name is not one. */
export function keyLimitSpec(resource: string): PolicySpec | undefined {
  if (!resource.startsWith("rls.")) return undefined;
  const m = KEY_LIMIT.exec(resource);
  if (m === null) return undefined;
  const n = Number(m[2]);
  if (n > UINT32_MAX) return undefined;
  const seconds = RLS_UNITS[m[3] as RlsUnit];
  const shadow = m[5] !== undefined ? { shadow: true } : {};
  if (m[1] === "fw") {
    if (m[4] !== undefined) return undefined;
    return {
      algorithm: "fixed_window",
      capacity: n,
      refillPerSecond: n / seconds,
      windowMs: seconds * 1000,
      ...shadow,
    };
  }
  const burst = m[4] !== undefined ? Number(m[4]) : n;
  if (burst > UINT32_MAX) return undefined;
  return { algorithm: "token_bucket", capacity: burst, refillPerSecond: n / seconds, ...shadow };
}
