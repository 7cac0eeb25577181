// The RLS of a region process (`geoquota region` with `rls` in its config): the
// envoyproxy/ratelimit files it names, read once at start (a bad file stops
// the region with file:line), in front of the region's limiter; with `rls.rlqs`
// the RLQS stream on the same listener, its buckets matched by the same rules.
import type { RegionConfig } from "@geoquota/config";
import type { Limiter } from "@geoquota/limiter";
import { loadEnvoyConfigs } from "./envoy-config.js";
import { RlqsService } from "./rlqs.js";
import { limiterRlqsBackend } from "./rlqs-backend.js";
import { RuleSet } from "./rules.js";
import { type RlsServer, startRlsServer } from "./server.js";
import { RlsService } from "./service.js";

export interface RegionRls {
  readonly server: RlsServer;
  readonly rules: RuleSet;
  /** Present when `rls.rlqs` is. */
  readonly rlqs?: RlqsService;
}

/** Starts the RLS `config.rls` describes; undefined when it is off (absent). */
export async function startRegionRls(
  config: Pick<RegionConfig, "rls">,
  limiter: Limiter,
  onError?: (err: unknown) => void,
): Promise<RegionRls | undefined> {
  const rls = config.rls;
  if (rls === undefined) return undefined;
  const rules = new RuleSet(loadEnvoyConfigs(rls.configs));
  const service = new RlsService(limiter, rules, {
    algorithm: rls.algorithm,
    ...(rls.burst !== undefined ? { burst: rls.burst } : {}),
    nativeDomain: rls.domain,
  });
  const q = rls.rlqs;
  const rlqs =
    q === undefined
      ? undefined
      : new RlqsService(limiterRlqsBackend(limiter, service, onError !== undefined ? { onError } : {}), {
          assignmentTtlMs: q.assignmentTtlMs,
          deliveryMarginMs: q.deliveryMarginMs,
          renewBeforeMs: q.renewBeforeMs,
          denyTtlMs: q.assignmentTtlMs,
          bucketsPerStreamMax: q.bucketsPerStreamMax,
          initialFraction: q.assignmentFraction,
          silentAfterMs: q.silentAfterMs,
        });
  const server = await startRlsServer({
    service,
    ...(rlqs !== undefined ? { rlqs } : {}),
    host: rls.listen.host,
    port: rls.listen.port,
    ...(onError !== undefined ? { onError } : {}),
  });
  return { server, rules, ...(rlqs !== undefined ? { rlqs } : {}) };
}
