// Prometheus metrics of the stream limiter. The registry is injected (one per
// service or test; never the global default). Label cardinality is bounded:
// `tenant_class` is the tenant's name only when the policies name it
// explicitly for a stream resource, else "default".
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export interface StreamMetrics {
  readonly connections: Gauge<string>;
  readonly pausedConnections: Gauge<string>;
  readonly pauseDuration: Histogram<"reason">;
  readonly pauses: Counter<"reason">;
  readonly admittedBytes: Counter<"tenant_class">;
  readonly admittedFrames: Counter<"tenant_class">;
  readonly rejectedConnections: Counter<"reason">;
}

export function createStreamMetrics(registry: Registry): StreamMetrics {
  const registers = [registry];
  return {
    connections: new Gauge({
      name: "geoquota_stream_connections",
      help: "Metered WebSocket connections open now",
      registers,
    }),
    pausedConnections: new Gauge({
      name: "geoquota_stream_paused_connections",
      help: "Connections whose socket is not being read now (waiting for tokens)",
      registers,
    }),
    pauseDuration: new Histogram({
      name: "geoquota_stream_pause_duration_seconds",
      help: "How long a connection stayed paused; reason = what it waited for first",
      labelNames: ["reason"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    pauses: new Counter({
      name: "geoquota_stream_pauses_total",
      help: "Times a connection stopped reading; reason: connection (per-connection cap) or tenant (global quota)",
      labelNames: ["reason"],
      registers,
    }),
    admittedBytes: new Counter({
      name: "geoquota_stream_admitted_bytes_total",
      help: "Inbound payload bytes delivered after metering",
      labelNames: ["tenant_class"],
      registers,
    }),
    admittedFrames: new Counter({
      name: "geoquota_stream_admitted_frames_total",
      help: "Inbound frames delivered after metering",
      labelNames: ["tenant_class"],
      registers,
    }),
    rejectedConnections: new Counter({
      name: "geoquota_stream_rejected_connections_total",
      help: "Connections closed by the limiter: tenants (too many active tenants), frame_too_large, queue_overflow",
      labelNames: ["reason"],
      registers,
    }),
  };
}
