// The faults the scenarios inject, against a real cluster: a partition cuts a
// region's gossip links by disabling their Toxiproxy proxies (the daemon sees
// its connections refused, exactly as with a dead WAN link; Redis and the
// limiter keep serving), and state loss is FLUSHALL on the region's own Redis,
// sent on a direct connection (not through a proxy).
import type { Cluster } from "../cluster/orchestrator.js";
import { dialPairs } from "../cluster/ids.js";
import type { ClusterSample } from "./types.js";

/** The proxy names of every gossip link with `region` at either end. */
export function gossipProxiesOf(ids: readonly string[], region: string): string[] {
  return dialPairs(ids)
    .filter(([a, b]) => a === region || b === region)
    .map(([a, b]) => `gossip_${a}_${b}`);
}

export async function setGossipLinks(cluster: Cluster, region: string, enabled: boolean): Promise<void> {
  const toxi = cluster.toxiproxy;
  if (!toxi) throw new Error("partition needs the cluster started with toxiproxy");
  const names = gossipProxiesOf(
    cluster.regions.map((r) => r.id),
    region,
  );
  await Promise.all(
    names.map(async (name) => {
      const p = await toxi.server.api.get(name);
      await p.update({ enabled, listen: p.listen, upstream: p.upstream });
    }),
  );
}

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
