// The daemon's frame handling: what goes out to peers (deltas each peer has
// not acknowledged, full syncs, digests of one bucket, which links are up) and
// what comes in (validated, authenticated to the link's peer, merged into the
// map, acked, relayed to the peers that do not hear the sender themselves).
// Redis is not touched here: a merged key is handed back to the daemon
// (`onMerged`), which writes it into Redis between rounds.
import {
  type ClockFrame,
  type DecodeLimits,
  decodeFrame,
  type DeltaFrame,
  encodeFrame,
  type Frame,
  type KeyRecord,
  type LinksFrame,
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
  /** `from`'s frame changed the map (`delta`: the entries that changed it): write them into Redis. */
  readonly onMerged: (changes: readonly { key: string; delta: KeyRecord }[], from: string) => void;
  /** A peer's clock stamp (the clock check; ignored when absent). */
  readonly onClock?: ((peer: string, frame: ClockFrame) => void) | undefined;
  /**
   * How long a peer's links frame is believed, ms: past it (or with none) everything merged from
   * any other peer is relayed to it, as if it heard no one.
   */
  readonly linksFreshMs: number;
}

/**
 * Delta frames sent to one peer in one round at most: 16 × 1,000 changed keys, several times
 * what 1% of a million keys changes in a round, so a busy region's changes never queue behind
 * one frame per round (the rest waits for the next round, or the buffer bound's full sync).
 */
export const DELTA_FRAMES_PER_ROUND = 16;

/** Delta frames remembered per peer until acknowledged (16 rounds of DELTA_FRAMES_PER_ROUND). */
const UNACKED_FRAMES_MAX = 256;

/** Keys per frame of a full sync. */
const FULL_SYNC_KEYS = 1_000;

/** Keys one digest frame covers at most (about 60 KB on the wire). */
export const DIGEST_KEYS_PER_BUCKET = 2_000;

export class FrameHandling {
  private readonly lastHeard = new Map<string, number>();
  private readonly lastAckLag = new Map<string, number>();
  private readonly sentAt = new Map<string, Map<number, number>>();
  /** Per peer, a full sync under way: the map's keys when it began, and the next to send. */
  private readonly fullSyncs = new Map<string, { keys: string[]; next: number }>();
  /**
   * Per peer, the delta frames sent and not yet acknowledged, in sending order: each frame's
   * version and the version it started after (the first of a round: what the peer had acked).
   * An ack drops every buffered change up to its version, so it may be applied only when the
   * frame it answers started at or below what the peer had acked: a round sends several frames,
   * and one the peer's transport dropped (its inbound rate limit) would otherwise be taken as
   * received by the ack of the frame after it.
   */
  private readonly unacked = new Map<string, { version: number; after: number }[]>();
  /** Per peer, the highest version an applied ack covered. */
  private readonly ackedTo = new Map<string, number>();
  /** Per peer, the peers its last links frame said it has a link up to, and when it came. */
  private readonly heard = new Map<string, { up: ReadonlySet<string>; atMs: number }>();
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

  /**
   * Each reachable peer gets the deltas it has not acknowledged, in up to DELTA_FRAMES_PER_ROUND
   * frames, after the next frames of a full sync under way (or one started when it needs one).
   */
  ship(): void {
    for (const peer of this.d.peers) {
      if (!this.d.link.isUp(peer)) continue;
      let budget = DELTA_FRAMES_PER_ROUND;
      if (this.d.replica.shipper.needsFullSync(peer)) this.startFullSync(peer);
      if (this.fullSyncs.has(peer)) budget -= this.continueFullSync(peer);
      let after = 0;
      for (let i = 0; i < budget; i++) {
        const frame = this.d.replica.nextDeltaFrame(peer, after);
        if (!frame || !this.send(peer, frame)) break;
        this.sentFrame(peer, frame.version, after === 0 ? (this.ackedTo.get(peer) ?? 0) : after);
        after = frame.version;
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

  /** Tells every reachable peer which of the others this region has a link up to (relays follow it). */
  sendLinks(): void {
    const up = this.d.peers.filter((p) => this.d.link.isUp(p));
    for (const peer of up) {
      this.send(peer, { kind: "links", from: this.d.region, up: up.filter((p) => p !== peer) });
    }
  }

  /**
   * A peer came (back) up, or its delta buffer overflowed: it gets the whole map, in frames of
   * 1,000 keys, DELTA_FRAMES_PER_ROUND per round from now on (ship() goes on with it) until every
   * key known now has been sent. Changes meanwhile are buffered as deltas, as usual. Built a
   * frame at a time and resumed where the peer's socket refused one: a million keys are never
   * copied whole, nor dropped for a full send buffer.
   */
  sendFullSync(peer: string): void {
    if (!this.d.link.isUp(peer)) return;
    this.startFullSync(peer);
    this.continueFullSync(peer);
  }

  private startFullSync(peer: string): void {
    this.d.replica.shipper.markSynced(peer);
    this.fullSyncs.set(peer, { keys: [...this.d.replica.state.keys()], next: 0 });
  }

  /** The next frames of `peer`'s full sync; how many were sent. */
  private continueFullSync(peer: string): number {
    const sync = this.fullSyncs.get(peer);
    if (sync === undefined) return 0;
    let sent = 0;
    while (sent < DELTA_FRAMES_PER_ROUND && sync.next < sync.keys.length) {
      const frame = this.d.replica.stateFrame(sync.keys.slice(sync.next, sync.next + FULL_SYNC_KEYS));
      if (frame.entries.length > 0) {
        if (!this.send(peer, frame)) break; // the socket is full: the rest next round
        sent++;
      }
      sync.next += FULL_SYNC_KEYS;
    }
    if (sync.next >= sync.keys.length) this.fullSyncs.delete(peer);
    return sent;
  }

  /**
   * A digest of the next bucket to every reachable peer (anti-entropy). The buckets double past
   * `digestBuckets` until one holds at most DIGEST_KEYS_PER_BUCKET keys: a map of a million keys
   * in 16 buckets would send 62,500 entries per frame, past what a peer decodes (10,000, 1 MiB).
   */
  sendDigest(): void {
    let buckets = this.d.digestBuckets;
    while (this.d.replica.state.size > buckets * DIGEST_KEYS_PER_BUCKET) buckets *= 2;
    const scope = { bucket: this.digestRound++ % buckets, bucketCount: buckets };
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
        if (!this.ackCovers(peer, frame.version)) return;
        const r = this.d.replica.receiveAck(frame);
        if (!r.ok) this.bad(peer, r.error.code);
        else this.ackedTo.set(peer, Math.max(this.ackedTo.get(peer) ?? 0, frame.version));
        return;
      }
      case "digest":
        for (const f of this.d.replica.repairFrames(frame)) this.send(peer, f);
        return;
      case "clock":
        this.d.onClock?.(peer, frame);
        return;
      case "links":
        this.onLinks(peer, frame);
        return;
    }
  }

  private sentFrame(peer: string, version: number, after: number): void {
    let q = this.unacked.get(peer);
    if (q === undefined) {
      q = [];
      this.unacked.set(peer, q);
    }
    q.push({ version, after });
    // A peer that stopped acking: forget the oldest (an ack of one of them is then ignored, and
    // its changes go out again: never lost).
    if (q.length > UNACKED_FRAMES_MAX) q.splice(0, q.length - UNACKED_FRAMES_MAX);
  }

  /**
   * Whether an ack of `version` from `peer` may drop the changes up to it: every frame of that
   * version still unanswered (the ack answers one of them: acks come back in sending order)
   * started at or below what the peer has acked. The frames up to the last of that version are
   * answered or lost either way and are forgotten. An ack of no frame in flight (a previous
   * life's, or one forgotten) is ignored: the changes are sent again.
   */
  private ackCovers(peer: string, version: number): boolean {
    const q = this.unacked.get(peer);
    if (q === undefined) return false;
    let last = -1;
    for (let i = q.length - 1; i >= 0; i--) {
      if (q[i]?.version === version) {
        last = i;
        break;
      }
    }
    if (last < 0) return false;
    const acked = this.ackedTo.get(peer) ?? 0;
    let covers = true;
    for (let i = 0; i <= last; i++) {
      const f = q[i];
      if (f !== undefined && f.version === version && f.after > acked) covers = false;
    }
    q.splice(0, last + 1);
    return covers;
  }

  private onLinks(peer: string, frame: LinksFrame): void {
    this.heard.set(peer, { up: new Set(frame.up), atMs: this.d.now() });
  }

  /**
   * Whether what `from` sent is relayed to `peer`: unless `peer` said lately that it has a link
   * up to `from` (then it got the same frame directly). A full mesh with every link up relays
   * nothing; a peer cut off from one other (a partial partition) still hears it through us.
   */
  private relayTo(from: string): (peer: string) => boolean {
    const now = this.d.now();
    return (peer) => {
      if (peer === from) return false;
      const h = this.heard.get(peer);
      return h === undefined || now - h.atMs > this.d.linksFreshMs || !h.up.has(from);
    };
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
    const merged: { key: string; delta: KeyRecord }[] = [];
    const relay = this.relayTo(frame.from);
    for (const { key, record } of frame.entries) {
      if (!this.d.knows(key)) continue;
      const changed = this.d.replica.mergeKey(key, record, conflicts);
      if (changed !== null) {
        // Relay (what changed our map, to the peers that do not hear the sender): keeps data
        // flowing around a one-way or partial partition.
        this.d.replica.shipper.recordFor(key, changed, relay);
        // Into Redis too: every region's counter entries live there (for the
        // quota view and re-learning after a restart), loans to us take effect.
        merged.push({ key, delta: changed });
      }
    }
    if (conflicts.length > 0) this.d.metrics?.conflicts.inc(conflicts.length);
    if (frame.version > 0) this.send(peer, { kind: "ack", from: this.d.region, version: frame.version });
    this.d.onMerged(merged, frame.from);
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
