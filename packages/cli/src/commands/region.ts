import { runRegion } from "@geoquota/limiter";

/** `geoquota region --config F`: the region's limiter service, until SIGINT/SIGTERM. */
export async function run(opts: Record<string, unknown>): Promise<number> {
  await runRegion(String(opts.config));
  return 0;
}
