// The KeyPolicy a test builds for one (tenant, resource): a token bucket at
// the whole base share unless told otherwise. Its type is written out here
// (the test kit imports no geoquota package but the spawners and the oracle)
// and is assignable to @geoquota/core's KeyPolicy.
export interface PolicyFixture<A extends string> {
  readonly tenant: string;
  readonly resource: string;
  readonly limit: {
    readonly algorithm: A;
    readonly capacity: number;
    readonly refillPerSecond: number;
    readonly windowMs?: number;
  };
  readonly baseShare: number;
  readonly floorShare: number;
}

export interface PolicyFixtureOptions<A extends string> {
  readonly tenant?: string;
  readonly resource?: string;
  /** Default token_bucket. */
  readonly algorithm?: A;
  /** Default 10. */
  readonly capacity?: number;
  /** Default 1 per second. */
  readonly refillPerSecond?: number;
  readonly windowMs?: number;
  /** ppm, default 1 000 000 (all of it). */
  readonly baseShare?: number;
  /** ppm, default 20 000. */
  readonly floorShare?: number;
}

export function keyPolicy<A extends string = "token_bucket">(
  o: PolicyFixtureOptions<A> = {},
): PolicyFixture<A> {
  return {
    tenant: o.tenant ?? "t1",
    resource: o.resource ?? "api",
    limit: {
      algorithm: o.algorithm ?? ("token_bucket" as A),
      capacity: o.capacity ?? 10,
      refillPerSecond: o.refillPerSecond ?? 1,
      ...(o.windowMs !== undefined ? { windowMs: o.windowMs } : {}),
    },
    baseShare: o.baseShare ?? 1_000_000,
    floorShare: o.floorShare ?? 20_000,
  };
}
