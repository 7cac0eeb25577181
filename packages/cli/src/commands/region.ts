import { loadRegionConfig } from "@geoquota/config";
import { runRegion } from "@geoquota/limiter";
import { reportReady, startedByOrchestrator } from "../cluster/ready.js";

/**
 * `geoquota region --config F`: the region's limiter service, and its Envoy rate limit
 * service (RLS v3, gRPC) when the config has `rls` (and RLQS with `rls.rlqs`), until SIGINT/SIGTERM.
 */
export async function run(opts: Record<string, unknown>): Promise<number> {
  const path = String(opts.config);
  const config = loadRegionConfig(path);
  // Started by the orchestrator, which reads the address back: a taken port is replaced.
  const service = await runRegion(path, {
    handleSignals: false,
    anyPortIfTaken: startedByOrchestrator(),
  });
  // gRPC, protobufjs and the Envoy config parser (≈ 5 MB of heap) load only for a region that
  // serves the RLS (issue 24 point 8: the idle footprint); the bundle keeps them in a chunk.
  const rls =
    config.rls === undefined
      ? undefined
      : await import("@geoquota/rls")
          .then(({ startRegionRls }) => startRegionRls(config, service.limiter))
          .catch(async (err: unknown) => {
            await service.close();
            throw err;
          });
  // Through the limiter's logger: the region's log stays one JSON object per line.
  if (rls !== undefined)
    service.app.log.info(
      { rls: rls.server.address, rlqs: rls.rlqs !== undefined },
      `rls listening on ${rls.server.address}${rls.rlqs !== undefined ? " (with rlqs)" : ""}`,
    );
  const stop = () => {
    void (async () => {
      await rls?.server.close();
      await service.close();
      process.exit(0);
    })();
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  reportReady({
    http: new URL(service.url).host,
    ...(rls !== undefined ? { rls: rls.server.address } : {}),
  });
  return 0;
}
