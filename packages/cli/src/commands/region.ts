import { runRegion } from "@geoquota/limiter";
import { reportReady } from "../cluster/ready.js";

/** `geoquota region --config F`: the region's limiter service, until SIGINT/SIGTERM. */
export async function run(opts: Record<string, unknown>): Promise<number> {
  await runRegion(String(opts.config));
  reportReady();
  return 0;
}
