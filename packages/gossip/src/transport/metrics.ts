import { Counter, Gauge, type Registry } from "prom-client";

/**
 * Transport metrics. Per-peer labels only ever take configured peer ids, and
 * `reason` labels come from fixed sets, so cardinality stays bounded even
 * when strangers connect.
 */
export interface TransportMetrics {
  framesIn: Counter<"peer">;
  bytesIn: Counter<"peer">;
  framesOut: Counter<"peer">;
  bytesOut: Counter<"peer">;
  framesDropped: Counter<"peer" | "reason">;
  handshakeFailures: Counter<"reason">;
  linkUp: Gauge<"peer">;
  linkDowns: Counter<"peer" | "reason">;
  reconnects: Counter<"peer">;
  rttSeconds: Gauge<"peer">;
}

/** Why a data frame did not reach its destination. */
export type DropReason = "rate_limited" | "handler_error" | "link_down" | "backpressure" | "oversize";

export function createTransportMetrics(registry: Registry, peers: readonly string[]): TransportMetrics {
  const registers = [registry];
  const m: TransportMetrics = {
    framesIn: new Counter({
      name: "geoquota_transport_received_frames_total",
      help: "Data frames received after authentication (including ones later dropped)",
      labelNames: ["peer"],
      registers,
    }),
    bytesIn: new Counter({
      name: "geoquota_transport_received_bytes_total",
      help: "Payload bytes of data frames received",
      labelNames: ["peer"],
      registers,
    }),
    framesOut: new Counter({
      name: "geoquota_transport_sent_frames_total",
      help: "Data frames handed to the socket",
      labelNames: ["peer"],
      registers,
    }),
    bytesOut: new Counter({
      name: "geoquota_transport_sent_bytes_total",
      help: "Payload bytes of data frames handed to the socket",
      labelNames: ["peer"],
      registers,
    }),
    framesDropped: new Counter({
      name: "geoquota_transport_dropped_frames_total",
      help: "Data frames dropped, by reason (rate_limited, handler_error inbound; link_down, backpressure, oversize outbound)",
      labelNames: ["peer", "reason"],
      registers,
    }),
    handshakeFailures: new Counter({
      name: "geoquota_transport_handshake_failures_total",
      help: "Handshakes that failed, by catalog reason (detected locally or signalled by the peer)",
      labelNames: ["reason"],
      registers,
    }),
    linkUp: new Gauge({
      name: "geoquota_transport_link_up",
      help: "1 while the authenticated link to the peer is open",
      labelNames: ["peer"],
      registers,
    }),
    linkDowns: new Counter({
      name: "geoquota_transport_link_downs_total",
      help: "Authenticated links that went down, by catalog reason",
      labelNames: ["peer", "reason"],
      registers,
    }),
    reconnects: new Counter({
      name: "geoquota_transport_reconnects_total",
      help: "Redials scheduled after a failed or lost connection",
      labelNames: ["peer"],
      registers,
    }),
    rttSeconds: new Gauge({
      name: "geoquota_transport_rtt_seconds",
      help: "Last ping/pong round-trip time to the peer",
      labelNames: ["peer"],
      registers,
    }),
  };
  for (const peer of peers) {
    m.linkUp.set({ peer }, 0);
    m.framesIn.inc({ peer }, 0);
    m.framesOut.inc({ peer }, 0);
    m.bytesIn.inc({ peer }, 0);
    m.bytesOut.inc({ peer }, 0);
    m.reconnects.inc({ peer }, 0);
  }
  return m;
}
