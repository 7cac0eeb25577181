import { runGossip } from "@geoquota/gossip";
import { reportReady } from "../cluster/ready.js";

/** `geoquota gossip --config F`: the region's gossip daemon, until SIGINT/SIGTERM. */
export async function run(opts: Record<string, unknown>): Promise<number> {
  await runGossip(String(opts.config), { onStarted: reportReady });
  return 0;
}
