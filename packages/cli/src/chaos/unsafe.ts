// The control that proves the checks are not vacuous: a deliberately unsafe
// deployment, like the seed's local fallback. N independent 1-region clusters
// each enforce the FULL global limit for the same tenant; the same traffic,
// the same exact oracle and the same Σ-shares check as the chaos scenarios
// must report the overshoot (each region holds U, so Σ = N·U).
import { checkGlobalBound, type OracleVerdict } from "@geoquota/sim";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";
import { RequestLog } from "../demo/request-log.js";
import { realClock } from "../demo/scenarios.js";
import { TrafficGenerator } from "../demo/traffic.js";
import { checkShareSum, type ShareSumVerdict } from "./checks.js";
import { CHAOS_POLICIES, CHAOS_RESOURCE } from "./cluster.js";
import { SHARE_PAIRING_MS } from "./run-scenario.js";
import { QuotaSampler } from "./sampler.js";
import { chaosSender } from "./sender.js";

export interface UnsafeControlOptions {
  readonly startCluster: (o: ClusterOptions) => Promise<Cluster>;
  readonly clusters?: number;
  /**
   * The least time traffic runs. It then runs on (up to `maxDurationMs`)
   * until the overshoot is shown beyond doubt: the oracle's worst excess is
   * over one full burst C and the Σ-shares check has `minShareGroups` paired
   * groups. A fixed duration is not enough on a loaded machine: the traffic
   * falls behind its schedule (fewer admissions, a smaller overshoot) and the
   * samples of the three clusters answer too far apart to be paired.
   */
  readonly durationMs: number;
  readonly maxDurationMs?: number;
  readonly minShareGroups?: number;
  readonly tenant: string;
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  /** Requests per second sent to each independent cluster. */
  readonly ratePerCluster?: number;
}

export async function runUnsafeControl(
  o: UnsafeControlOptions,
): Promise<{ bound: OracleVerdict; shares: ShareSumVerdict }> {
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
    const sampler = new QuotaSampler({ urls, tenant: o.tenant, resource: CHAOS_RESOURCE, now });
    const ids = urls.map((_, i) => `independent-${i}`);
    const traffic = new TrafficGenerator({
      regionIds: ids,
      keys: [{ tenant: o.tenant, resource: CHAOS_RESOURCE, ...o.limit }],
      log,
      send: sender.send,
      now,
    });
    traffic.setDemand([Object.fromEntries(ids.map((id) => [id, rate]))]);
    sampler.start();
    traffic.start();
    const verdicts = () => ({
      bound: checkGlobalBound(log.admissions(0), o.limit),
      shares: checkShareSum(sampler.samples, n, { maxSpreadMs: SHARE_PAIRING_MS }),
    });
    const shown = (v: ReturnType<typeof verdicts>) =>
      v.bound.worstExcess > o.limit.capacity && v.shares.groupsChecked >= (o.minShareGroups ?? 10);
    await realClock.sleep(o.durationMs);
    const deadline = now() + (o.maxDurationMs ?? 60_000) - o.durationMs;
    while (now() < deadline && !shown(verdicts())) await realClock.sleep(250);
    await traffic.stop();
    await sampler.stop();
    await sender.close();
    return verdicts();
  } finally {
    await Promise.allSettled(clusters.map((c) => c.stop()));
  }
}
