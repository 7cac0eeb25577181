// The faults the scenarios inject, against a real cluster: a partition cuts a
// region's gossip links (Cluster.setGossipLinks disables their Toxiproxy
// proxies: the daemon sees its connections refused, exactly as with a dead WAN
// link; Redis and the limiter keep serving), and state loss is FLUSHALL on the
// region's own Redis, sent on a direct connection (not through a proxy).
import type { Cluster } from "../cluster/orchestrator.js";
import type { ClusterSample } from "./types.js";

export async function flushRegion(cluster: Cluster, region: string): Promise<void> {
  const r = cluster.regions.find((x) => x.id === region);
  if (!r) throw new Error(`no region ${region}`);
  const client = r.redisServer.client();
  try {
    await client.flushall();
  } finally {
    client.disconnect();
  }
}

/**
 * When the flushed region left recovery, as the polls saw it: the first sample
 * not recovering after one that was. Falls back to `fallbackMs` when the polls
 * never caught the recovery (it can be shorter than a poll interval).
 */
export function recoveryEnd(
  samples: readonly ClusterSample[],
  region: string,
  flushMs: number,
  fallbackMs: number,
): number {
  let seen = false;
  for (const s of samples) {
    if (s.tMs < flushMs) continue;
    const v = s.regions[region];
    if (!v) continue;
    if (v.recovering) seen = true;
    else if (seen) return s.tMs;
  }
  return fallbackMs;
}
