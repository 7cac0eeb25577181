import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** The daemon's own metrics (the transport registers its link metrics separately). */
export interface DaemonMetrics {
  roundDuration: Histogram<string>;
  bytesIn: Counter<"peer">;
  bytesOut: Counter<"peer">;
  framesIn: Counter<"peer" | "kind">;
  framesOut: Counter<"peer" | "kind">;
  badFrames: Counter<"peer" | "reason">;
  lag: Gauge<"peer">;
  loans: Counter<"event">;
  conflicts: Counter<string>;
  share: Gauge<"key" | "region">;
}

export function createDaemonMetrics(registry: Registry): DaemonMetrics {
  const registers = [registry];
  return {
    roundDuration: new Histogram({
      name: "geoquota_gossip_round_seconds",
      help: "Duration of one gossip round (local reads, policy, shipping)",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    bytesIn: new Counter({
      name: "geoquota_gossip_bytes_in_total",
      help: "Frame bytes received",
      labelNames: ["peer"],
      registers,
    }),
    bytesOut: new Counter({
      name: "geoquota_gossip_bytes_out_total",
      help: "Frame bytes sent",
      labelNames: ["peer"],
      registers,
    }),
    framesIn: new Counter({
      name: "geoquota_gossip_frames_in_total",
      help: "Valid frames received",
      labelNames: ["peer", "kind"],
      registers,
    }),
    framesOut: new Counter({
      name: "geoquota_gossip_frames_out_total",
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
    share: new Gauge({
      name: "geoquota_gossip_target_share_ppm",
      help: "Target share per region for sampled keys, ppm",
      labelNames: ["key", "region"],
      registers,
    }),
  };
}
