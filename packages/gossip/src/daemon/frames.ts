// The daemon's frame handling: what goes out to peers (deltas each peer has
// not acknowledged, full syncs, digests of one bucket) and what comes in
// (validated, authenticated to the link's peer, merged into the map, acked,
// relayed). Redis is not touched here: a merged key is handed back to the
// daemon (`onMerged`), which writes it into Redis between rounds.
import {
  type ClockFrame,
  CrdtMap,
  type DecodeLimits,
  decodeFrame,
  type DeltaFrame,
  encodeFrame,
  type Frame,
  type LoanConflict,
  type Replica,
} from "@geoquota/crdt";
import type { DaemonMetrics } from "./metrics.js";

/** The transport as the daemon sees it (the WebSocket Mesh in production). */
export interface FrameLink {
  send(peer: string, bytes: Uint8Array): boolean;
  isUp(peer: string): boolean;
}

export interface FrameHandlingDeps {
  readonly region: string;
  readonly peers: readonly string[];
  readonly replica: Replica;
  readonly link: FrameLink;
  readonly metrics: DaemonMetrics | undefined;
  readonly limits: DecodeLimits | undefined;
  readonly digestBuckets: number;
  /** Monotonic ms. */
  readonly now: () => number;
  /** Whether this region has a policy for the key (frames about others are ignored). */
  readonly knows: (key: string) => boolean;
  /** A remote record changed the map: write it into Redis. */
  readonly onMerged: (keys: readonly string[]) => void;
  /** A peer's clock stamp (the clock check; ignored when absent). */
  readonly onClock?: ((peer: string, frame: ClockFrame) => void) | undefined;
}

export class FrameHandling {
  private readonly lastHeard = new Map<string, number>();
  private readonly lastAckLag = new Map<string, number>();
  private readonly sentAt = new Map<string, Map<number, number>>();
  private digestRound = 0;
  badFrames = 0;

  constructor(private readonly d: FrameHandlingDeps) {}

  send(peer: string, frame: Frame): boolean {
    const bytes = encodeFrame(frame);
    const ok = this.d.link.send(peer, bytes);
    if (ok) {
      this.d.metrics?.bytesOut.inc({ peer }, bytes.byteLength);
      this.d.metrics?.framesOut.inc({ peer, kind: frame.kind });
    }
    return ok;
  }

  /** Each reachable peer gets the deltas it has not acknowledged (or a full sync when it needs one). */
  ship(): void {
    for (const peer of this.d.peers) {
      if (!this.d.link.isUp(peer)) continue;
      if (this.d.replica.shipper.needsFullSync(peer)) {
        this.sendFullSync(peer);
        continue;
      }
      const frame = this.d.replica.nextDeltaFrame(peer);
      if (!frame) continue;
      if (this.send(peer, frame)) {
        let sent = this.sentAt.get(peer);
        if (!sent) {
          sent = new Map();
          this.sentAt.set(peer, sent);
        }
        sent.set(frame.version, this.d.now());
        if (sent.size > 64) sent.delete(sent.keys().next().value as number);
      }
    }
  }

  sendFullSync(peer: string): void {
    if (!this.d.link.isUp(peer)) return;
    for (const frame of this.d.replica.fullSyncFrames(peer)) {
      if (frame.entries.length > 0) this.send(peer, frame);
    }
  }

  /** A digest of the next bucket to every reachable peer (anti-entropy). */
  sendDigest(): void {
    const scope = {
      bucket: this.digestRound++ % this.d.digestBuckets,
      bucketCount: this.d.digestBuckets,
    };
    const frame = this.d.replica.digestFrame(scope);
    for (const peer of this.d.peers) if (this.d.link.isUp(peer)) this.send(peer, frame);
  }

  /** A binary frame from an authenticated peer. Bad frames are counted and dropped. */
  onFrame(peer: string, bytes: Uint8Array): void {
    this.d.metrics?.bytesIn.inc({ peer }, bytes.byteLength);
    const decoded = decodeFrame(bytes, this.d.limits);
    if (!decoded.ok) {
      this.bad(peer, decoded.error.code);
      return;
    }
    const frame = decoded.value;
    // The link authenticated `peer`; a frame claiming another sender is forged.
    if (frame.from !== peer) {
      this.bad(peer, "GQ_ERR_FORGED_SENDER");
      return;
    }
    this.lastHeard.set(peer, this.d.now());
    this.d.metrics?.framesIn.inc({ peer, kind: frame.kind });
    switch (frame.kind) {
      case "delta":
        this.onDelta(peer, frame);
        return;
      case "ack": {
        const sent = this.sentAt.get(peer)?.get(frame.version);
        if (sent !== undefined) {
          this.lastAckLag.set(peer, this.d.now() - sent);
          this.d.metrics?.lag.set({ peer }, (this.d.now() - sent) / 1000);
        }
        const r = this.d.replica.receiveAck(frame);
        if (!r.ok) this.bad(peer, r.error.code);
        return;
      }
      case "digest":
        for (const f of this.d.replica.repairFrames(frame)) this.send(peer, f);
        return;
      case "clock":
        this.d.onClock?.(peer, frame);
        return;
    }
  }

  /** A frame the daemon refused elsewhere (a bad rollout frame). */
  countBad(peer: string, reason: string): void {
    this.bad(peer, reason);
  }

  private bad(peer: string, reason: string): void {
    this.badFrames++;
    this.d.metrics?.badFrames.inc({ peer, reason });
  }

  private onDelta(peer: string, frame: DeltaFrame): void {
    const conflicts: LoanConflict[] = [];
    const merged: string[] = [];
    for (const { key, record } of frame.entries) {
      if (!this.d.knows(key)) continue;
      if (CrdtMap.mergeKeyInto(this.d.replica.state, key, record, conflicts)) {
        // Relay: keeps data flowing around a one-way or partial partition.
        this.d.replica.shipper.record(key, record, frame.from);
        // Into Redis too: every region's counter entries live there (for the
        // quota view and re-learning after a restart), loans to us take effect.
        merged.push(key);
      }
    }
    if (conflicts.length > 0) this.d.metrics?.conflicts.inc(conflicts.length);
    if (frame.version > 0) this.send(peer, { kind: "ack", from: this.d.region, version: frame.version });
    this.d.onMerged(merged);
  }

  /** Per peer: link up, ms since its last frame, last ack round trip. */
  peerStatus(peer: string): { up: boolean; lastHeardMs: number | null; lagMs: number | null } {
    const heard = this.lastHeard.get(peer);
    return {
      up: this.d.link.isUp(peer),
      lastHeardMs: heard === undefined ? null : Math.round(this.d.now() - heard),
      lagMs: this.lastAckLag.get(peer) ?? null,
    };
  }
}
