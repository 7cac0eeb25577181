// The RLQS backend on a region's limiter (DESIGN §11): a bucket_id is matched by the RLS's own
// lookup (RlsService.targetOf: the envoyproxy/ratelimit rules, or the native domain's
// `tenant`/`resource`), so a bucket and a descriptor with the same entries share one counter;
// assignments are reserved and usage counted through the limiter (lua/assign_reserve.lua,
// lua/assign_usage.lua).
import { SHARE_UNITS } from "@geoquota/core";
import { type Limiter, LimiterError } from "@geoquota/limiter";
import type { RlqsBackend, RlqsGrant, RlqsTarget } from "./rlqs.js";
import type { RlqsLimits } from "./rlqs-sizing.js";
import type { RlsEntry } from "./protos.js";
import type { RlsService } from "./service.js";

/**
 * A bucket_id is a map: its entries have no order, while a descriptor's do (the rule tree is
 * walked entry by entry). The bucket matches what the first of its orders that matches at all
 * matches (orders in lexicographic permutation order of the keys, so the answer is stable);
 * the count of orders is what bounds the entries.
 */
export const RLQS_BUCKET_ENTRIES_MAX = 5;

const NOTHING: RlqsGrant = { burst: 0, rate: 0, ttlUs: 0 };

function* orders<T>(xs: readonly T[]): Generator<T[]> {
  if (xs.length <= 1) {
    yield [...xs];
    return;
  }
  for (let i = 0; i < xs.length; i++) {
    const rest = [...xs.slice(0, i), ...xs.slice(i + 1)];
    for (const tail of orders(rest)) yield [xs[i] as T, ...tail];
  }
}

export interface LimiterRlqsOptions {
  /** A store failure while counting a usage report (the stream goes on: see report). */
  readonly onError?: (err: unknown) => void;
}

export function limiterRlqsBackend(
  limiter: Limiter,
  rls: RlsService,
  o: LimiterRlqsOptions = {},
): RlqsBackend {
  return {
    match(domain, bucket): RlqsTarget {
      const entries: RlsEntry[] = Object.keys(bucket)
        .sort()
        .map((key) => ({ key, value: bucket[key] as string }));
      // An unknown bucket gets DENY_ALL, not "no assignment": the proxy's no_assignment_behavior
      // is its own config (Envoy's default allows all), so only an explicit DENY_ALL keeps the
      // bound whatever the proxy was told. As the RLS answers OK for it, but that OK is per
      // request and counted nowhere; an RLQS assignment would be spent unseen.
      if (entries.length === 0 || entries.length > RLQS_BUCKET_ENTRIES_MAX) return { kind: "deny" };
      for (const order of orders(entries)) {
        const t = rls.targetOf(domain, { entries: order, limit: null, hits_addend: null }, 0);
        if (t.kind === "none") continue;
        if (t.kind === "unlimited") return { kind: "allow" };
        // A zero limit admits nothing. A shadow limit never denies (RLS: counted, OK): RLQS has no
        // report-only assignment, so it is ALLOW_ALL and its usage is not counted.
        if (t.zero) return { kind: "deny" };
        if (t.shadow) return { kind: "allow" };
        return { kind: "policy", tenant: t.tenant, resource: t.resource };
      }
      return { kind: "deny" };
    },

    limits(t): RlqsLimits | undefined {
      try {
        const spec = limiter.spec(t.tenant, t.resource);
        const own = limiter.regionShares(t.tenant, t.resource).find((r) => r.id === limiter.region);
        if (own === undefined) return undefined;
        const part = own.baseShare / SHARE_UNITS;
        return {
          capacity: spec.capacity,
          rate: spec.refillPerSecond,
          sliceCapacity: spec.capacity * part,
          sliceRate: spec.refillPerSecond * part,
        };
      } catch (err) {
        if (err instanceof LimiterError && err.code === "GQ_ERR_POLICY_UNKNOWN") return undefined;
        throw err;
      }
    },

    async reserve(t, ask, ttlUs, marginUs): Promise<RlqsGrant> {
      try {
        const r = await limiter.reserveAssignment(t.tenant, t.resource, {
          id: ask.id,
          burst: ask.burst,
          rate: ask.rate,
          ttlUs,
          marginUs,
          ...(ask.supersedes !== undefined ? { supersedes: ask.supersedes } : {}),
        });
        switch (r.kind) {
          case "reserved":
            return r.grant;
          case "allow_list":
          case "shadow":
            return { ...NOTHING, blanket: "ALLOW_ALL" };
          case "deny_list":
            return { ...NOTHING, blanket: "DENY_ALL" };
          case "policy_unknown":
            return NOTHING;
        }
      } catch (err) {
        // Redis unavailable: nothing reserved, so the proxy denies and is asked again soon.
        if (err instanceof LimiterError && err.statusCode >= 500) return NOTHING;
        throw err;
      }
    },

    async report(t, allowed, denied) {
      // A report the store could not count is lost to demand and to the oracle's view, never
      // to the bound (the reservation holds what the proxy may spend): the stream goes on.
      await limiter.countUsage(t.tenant, t.resource, allowed, denied).catch((err: unknown) => {
        if (err instanceof LimiterError && err.statusCode >= 500) o.onError?.(err);
        else throw err;
      });
    },
  };
}
