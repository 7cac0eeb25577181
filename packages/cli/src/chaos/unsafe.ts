// The control that proves the oracle is not vacuous: a deliberately unsafe
// deployment, like the seed's local fallback. N independent 1-region clusters
// each enforce the FULL global limit for the same tenant; the same traffic and
// the same exact oracle as the chaos scenarios must report the overshoot.
import { checkGlobalBound, type OracleVerdict } from "@geoquota/testkit";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import { RequestLog } from "../demo/request-log.js";
import { realClock } from "../demo/scenarios.js";
import { TrafficGenerator } from "../demo/traffic.js";
import { CHAOS_POLICIES, CHAOS_RESOURCE } from "./cluster.js";
import { chaosSender } from "./sender.js";

export interface UnsafeControlOptions {
  readonly startCluster: (o: ClusterOptions) => Promise<Cluster>;
  readonly clusters?: number;
  readonly durationMs: number;
  readonly tenant: string;
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  /** Requests per second sent to each independent cluster. */
  readonly ratePerCluster?: number;
}

export async function runUnsafeControl(o: UnsafeControlOptions): Promise<OracleVerdict> {
  const n = o.clusters ?? 3;
  const settled = await Promise.allSettled(
    Array.from({ length: n }, () => o.startCluster({ regions: 1, policiesFile: CHAOS_POLICIES })),
  );
  const clusters = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  try {
    const failed = settled.find((s) => s.status === "rejected");
    if (failed && failed.status === "rejected") throw failed.reason;
    const origin = performance.now();
    const now = () => performance.now() - origin;
    const urls = clusters.map((c) => c.regions[0]!.url);
    const rate = o.ratePerCluster ?? 60;
    const log = new RequestLog(Math.ceil((rate * n * o.durationMs) / 1000) * 2 + 1000);
    const sender = chaosSender(urls, now);
    const ids = urls.map((_, i) => `independent-${i}`);
    const traffic = new TrafficGenerator({
      regionIds: ids,
      keys: [{ tenant: o.tenant, resource: CHAOS_RESOURCE, ...o.limit }],
      log,
      send: sender.send,
      now,
    });
    traffic.setDemand([Object.fromEntries(ids.map((id) => [id, rate]))]);
    traffic.start();
    await realClock.sleep(o.durationMs);
    await traffic.stop();
    await sender.close();
    return checkGlobalBound(log.admissions(0), o.limit);
  } finally {
    await Promise.allSettled(clusters.map((c) => c.stop()));
  }
}
