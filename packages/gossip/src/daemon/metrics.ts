import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { SHARE_UNITS } from "@geoquota/core";

/** The target-share gauge: takes ppm (as the policy computes it), exports a ratio; unconfigured keys are not exported. */
export interface TargetShareGauge {
  set(labels: { readonly key: string; readonly region: string }, sharePpm: number): void;
}

/** The daemon's own metrics (the transport registers its link metrics separately). */
export interface DaemonMetrics {
  roundDuration: Histogram<string>;
  /** Rounds scheduled at the fast cadence because some key's targets moved (daemon.ts). */
  fastRounds: Counter<string>;
  wakes: Counter<string>;
  bytesIn: Counter<"peer">;
  bytesOut: Counter<"peer">;
  framesIn: Counter<"peer" | "kind">;
  framesOut: Counter<"peer" | "kind">;
  badFrames: Counter<"peer" | "reason">;
  lag: Gauge<"peer">;
  loans: Counter<"event">;
  conflicts: Counter<string>;
  share: TargetShareGauge;
  /** 1 while some shard of this region's Redis is in recovery (DESIGN §4). */
  recovering: Gauge<string>;
  /** 1 while a setting the start check verified is unsafe again, by setting (the limiter's metric too). */
  setupDrift: Gauge<"setting">;
  /** Times a checked setting became unsafe while running, by setting. */
  setupDriftChanges: Counter<"setting">;
  /** Estimated clock_peer − clock_self of the Redis clocks, seconds (DESIGN §1.2 "Checked"). */
  clockOffset: Gauge<"peer">;
  /** Half-width of that estimate's interval, seconds. */
  clockUncertainty: Gauge<"peer">;
  /** 1 while lending to and borrowing from the peer is off for its clock. */
  clockExcluded: Gauge<"peer">;
  /** Times the peer was excluded for its clock (or a missing or stale estimate). */
  clockExclusions: Counter<"peer">;
}

export interface DaemonMetricsOptions {
  /**
   * Whether a key (`tenant|resource`) may appear as a label: main passes "a
   * configured policy names exactly this tenant and resource". Default: none,
   * so tenants seen on the wire never create series.
   */
  readonly exportKey?: (key: string) => boolean;
  /** The Redis settings watched for drift (`SETUP_SETTINGS`): their series start at 0. */
  readonly settings?: readonly string[];
}

export function createDaemonMetrics(registry: Registry, options: DaemonMetricsOptions = {}): DaemonMetrics {
  const registers = [registry];
  const exportKey = options.exportKey ?? (() => false);
  // Same names and labels as the limiter's (`setting`: a fixed few), every series present from the start.
  const setupDrift = new Gauge({
    name: "geoquota_redis_setup_drift",
    help: "1 while a Redis setting checked at start is unsafe again (grants and returns held), by setting",
    labelNames: ["setting"] as const,
    registers,
  });
  const setupDriftChanges = new Counter({
    name: "geoquota_redis_setup_drift_changes_total",
    help: "Times a Redis setting checked at start became unsafe while running, by setting",
    labelNames: ["setting"] as const,
    registers,
  });
  for (const setting of options.settings ?? []) {
    setupDrift.set({ setting }, 0);
    setupDriftChanges.inc({ setting }, 0);
  }
  // `gq_region`, not `region`: scrape configs give every target a `region` label (ops/README.md),
  // which would overwrite ours. Series of a key no policy names any more go at the next scrape.
  const shareSeries = new Map<string, { key: string; gq_region: string }>();
  const share = new Gauge({
    name: "geoquota_gossip_target_share_ratio",
    help: "Target share (0..1) per region (gq_region) for keys with an explicit policy",
    labelNames: ["key", "gq_region"],
    registers,
    collect() {
      for (const [k, l] of shareSeries)
        if (!exportKey(l.key)) {
          this.remove(l);
          shareSeries.delete(k);
        }
    },
  });
  return {
    roundDuration: new Histogram({
      name: "geoquota_gossip_round_duration_seconds",
      help: "Duration of one gossip round (local reads, policy, shipping)",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    fastRounds: new Counter({
      name: "geoquota_gossip_fast_rounds_total",
      help: "Rounds that came at the fast cadence because the round before moved some key's target shares",
      registers,
    }),
    wakes: new Counter({
      name: "geoquota_gossip_wakes_total",
      help: "Rounds brought forward: by=limiter, the region's limiter started denying a key (demand crossed its slice); by=peer, a peer's counters moved a key's targets or a loan this region granted came back",
      labelNames: ["by"] as const,
      registers,
    }),
    bytesIn: new Counter({
      name: "geoquota_gossip_received_bytes_total",
      help: "Frame bytes received",
      labelNames: ["peer"],
      registers,
    }),
    bytesOut: new Counter({
      name: "geoquota_gossip_sent_bytes_total",
      help: "Frame bytes sent",
      labelNames: ["peer"],
      registers,
    }),
    framesIn: new Counter({
      name: "geoquota_gossip_received_frames_total",
      help: "Valid frames received",
      labelNames: ["peer", "kind"],
      registers,
    }),
    framesOut: new Counter({
      name: "geoquota_gossip_sent_frames_total",
      help: "Frames sent",
      labelNames: ["peer", "kind"],
      registers,
    }),
    badFrames: new Counter({
      name: "geoquota_gossip_bad_frames_total",
      help: "Frames rejected (malformed, oversize, wrong version, forged sender)",
      labelNames: ["peer", "reason"],
      registers,
    }),
    lag: new Gauge({
      name: "geoquota_gossip_replication_lag_seconds",
      help: "Time from sending a delta to its ack, per peer",
      labelNames: ["peer"],
      registers,
    }),
    loans: new Counter({
      name: "geoquota_gossip_loans_total",
      help: "Loan events: granted, renewed, refused, returned, held (read back, not yet durable: kept from peers)",
      labelNames: ["event"],
      registers,
    }),
    conflicts: new Counter({
      name: "geoquota_gossip_loan_conflicts_total",
      help: "Equal-seq loan conflicts met while merging",
      registers,
    }),
    share: {
      set(labels, sharePpm) {
        if (!exportKey(labels.key)) return;
        const l = { key: labels.key, gq_region: labels.region };
        shareSeries.set(`${l.key}\u0000${l.gq_region}`, l);
        share.set(l, sharePpm / SHARE_UNITS);
      },
    },
    recovering: new Gauge({
      name: "geoquota_region_recovering",
      help: "1 while some shard of this region's Redis is in recovery (incarnation younger than D + 2ε)",
      registers,
    }),
    setupDrift,
    setupDriftChanges,
    clockOffset: new Gauge({
      name: "geoquota_clock_offset_seconds",
      help: "Estimated offset of the peer's Redis clock from this region's (peer − self), seconds",
      labelNames: ["peer"],
      registers,
    }),
    clockUncertainty: new Gauge({
      name: "geoquota_clock_offset_uncertainty_seconds",
      help: "Half-width of the clock offset estimate (the round trip less the peer's hold, halved), seconds",
      labelNames: ["peer"],
      registers,
    }),
    clockExcluded: new Gauge({
      name: "geoquota_clock_peer_excluded",
      help: "1 while no loans are granted to or used from the peer: its clock offset may exceed the safe margin",
      labelNames: ["peer"],
      registers,
    }),
    clockExclusions: new Counter({
      name: "geoquota_clock_exclusions_total",
      help: "Times a peer was taken out of lending for its clock offset (or a missing or stale estimate)",
      labelNames: ["peer"],
      registers,
    }),
  };
}
