// The chaos cluster: 3 regions, every gossip link and every limiter→Redis link
// behind the real Toxiproxy, the chaos policies, one region on the leased
// in-process path. Between scenarios: Toxiproxy reset, WAN latency back on,
// and wait until every limiter is ready and every gossip link is up again.
import { join } from "node:path";
import { repoRoot, waitFor } from "@geoquota/procs";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import { gossipProxyNames, regionIds } from "../cluster/ids.js";
import type { Rng } from "@geoquota/sim";
import { addWanLatency } from "./toxics.js";

export const CHAOS_RESOURCE = "chaos";
export const CHAOS_POLICIES = join(repoRoot, "regions", "chaos-policies.json");
/**
 * In-process lease sizing of the leased region: sized from the rate, as the config's default
 * is, but under a ceiling of 2 batches instead of the default 100 (1000 here), so that what a
 * cut-off limiter may hold (leasedHeldBound: 2·maxBatch + lowWater = 43) stays well under the
 * chaos key's capacity (200) and the fail-closed check keeps its teeth.
 */
export const LEASED = { batch: 10, lowWater: 3, maxBatch: 20 } as const;

export interface ChaosTopology {
  readonly regions: number;
  /** The one region whose limiter serves from in-process leases. */
  readonly leasedRegion: string;
}

export function chaosTopology(regions = 3): ChaosTopology {
  const ids = regionIds(regions);
  return { regions, leasedRegion: ids[ids.length - 1]! };
}

export function chaosClusterOptions(t: ChaosTopology): ClusterOptions {
  return {
    regions: t.regions,
    toxiproxy: true,
    policiesFile: CHAOS_POLICIES,
    regionOverrides: {
      [t.leasedRegion]: { leased: { enabled: true, ...LEASED } },
    },
  };
}

async function ok(url: string): Promise<unknown> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    return res.ok ? await res.json() : undefined;
  } catch {
    return undefined;
  }
}

/** Every limiter ready and every daemon sees every peer up. */
export async function clusterHealthy(cluster: Cluster): Promise<boolean> {
  const checks = await Promise.all(
    cluster.regions.map(async (r) => {
      const [ready, status] = await Promise.all([ok(`${r.url}/readyz`), ok(`${r.gossipUrl}/v1/status`)]);
      if (ready === undefined || !status) return false;
      const peers = (status as { peers?: Record<string, { up?: unknown }> }).peers ?? {};
      return cluster.regions.every((p) => p.id === r.id || peers[p.id]?.up === true);
    }),
  );
  return checks.every(Boolean);
}

/** Clean slate for the next scenario: no toxics, every proxy enabled, WAN latency, links up. */
export async function prepareCluster(cluster: Cluster, rng: Rng, timeoutMs = 20_000): Promise<void> {
  const toxi = cluster.toxiproxy;
  if (!toxi) throw new Error("chaos needs the cluster started with toxiproxy: true");
  await toxi.server.reset();
  await addWanLatency(toxi.server.api, gossipProxyNames(cluster.regions.map((r) => r.id)), rng);
  await waitFor(
    "chaos cluster healthy (limiters ready, gossip links up)",
    () => clusterHealthy(cluster),
    timeoutMs,
    100,
  );
}
