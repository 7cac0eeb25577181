// Per-peer delta buffers for delta shipping (Almeida et al., §"delta-interval"
// anti-entropy with acks), bounded in memory.
//
// Every recorded change gets the next local version. Each peer's buffer holds,
// per key, the join of every delta not yet acknowledged by that peer, tagged
// with the version of the key's latest change; the Map is kept in that version
// order (a changed key moves to the end). A frame carries a prefix of the
// buffer and the version of its last entry; an ack of version v drops the
// entries whose latest change is ≤ v. A key changed again after it was sent
// keeps its higher version and stays, still holding the earlier content, so
// nothing is lost; resending is harmless because join is idempotent. Acks are
// monotone (max) and acks above the current version are ignored, so old,
// repeated or reordered acks are harmless.
//
// Bound: a buffer never holds more than maxBufferedKeys keys. When one more
// would not fit, the buffer is emptied and the peer is flagged for full sync:
// the owner sends it its full state (or drives digest anti-entropy) and calls
// markSynced. Buffering restarts with the change that overflowed, so changes
// after the flag are still shipped as deltas.
import { err, ok, type Result } from "./errors.js";
import { KeyRecord } from "./record.js";

export interface DeltaEntry {
  key: string;
  record: KeyRecord;
}

export interface DeltaBatch {
  /** Ack this version to drop every entry of the batch (and anything older). */
  version: number;
  entries: DeltaEntry[];
}

export interface DeltaShipperOptions {
  peers: readonly string[];
  /** Per-peer bound on buffered keys. Default 10 000. */
  maxBufferedKeys?: number;
  /** Entries per batch. Default 1 000. */
  maxEntriesPerFrame?: number;
  /**
   * First version is startVersion + 1. A restarted owner should start above
   * any version it sent before (e.g. its Redis TIME in µs) so a late ack from
   * its previous life cannot drop new entries.
   */
  startVersion?: number;
}

interface Buffered {
  record: KeyRecord;
  version: number;
}

interface PeerState {
  acked: number;
  buffer: Map<string, Buffered>;
  fullSync: boolean;
  overflows: number;
}

export class DeltaShipper {
  private readonly peers = new Map<string, PeerState>();
  private readonly maxBufferedKeys: number;
  private readonly maxEntriesPerFrame: number;
  private current: number;

  constructor(opts: DeltaShipperOptions) {
    this.maxBufferedKeys = opts.maxBufferedKeys ?? 10_000;
    this.maxEntriesPerFrame = opts.maxEntriesPerFrame ?? 1_000;
    if (this.maxBufferedKeys < 1 || this.maxEntriesPerFrame < 1) {
      throw new RangeError("maxBufferedKeys and maxEntriesPerFrame must be >= 1");
    }
    this.current = opts.startVersion ?? 0;
    for (const p of opts.peers) this.addPeer(p);
  }

  /** Version of the latest recorded change. */
  get version(): number {
    return this.current;
  }

  get peerIds(): string[] {
    return [...this.peers.keys()];
  }

  addPeer(peer: string): void {
    if (!this.peers.has(peer)) {
      // A new peer knows nothing: it starts with a full sync.
      this.peers.set(peer, {
        acked: this.current,
        buffer: new Map(),
        fullSync: this.current > 0,
        overflows: 0,
      });
    }
  }

  removePeer(peer: string): void {
    this.peers.delete(peer);
  }

  /**
   * Records a delta for key, for every peer except `except` (the peer it came
   * from, when relaying). Returns the new version.
   */
  record(key: string, delta: KeyRecord, except?: string): number {
    return this.recordFor(key, delta, (peer) => peer !== except);
  }

  /** Records a delta for key, for the peers `to` accepts (a relay to some peers only). Returns the new version. */
  recordFor(key: string, delta: KeyRecord, to: (peer: string) => boolean): number {
    const version = ++this.current;
    for (const [peer, st] of this.peers) {
      if (!to(peer)) continue;
      const cur = st.buffer.get(key);
      if (cur !== undefined) {
        KeyRecord.mergeInto(cur.record, delta);
        cur.version = version;
        // Move to the end: the Map stays ordered by latest change.
        st.buffer.delete(key);
        st.buffer.set(key, cur);
        continue;
      }
      if (st.buffer.size >= this.maxBufferedKeys) {
        st.buffer.clear();
        st.fullSync = true;
        st.overflows++;
      }
      st.buffer.set(key, { record: KeyRecord.copy(delta), version });
    }
    return version;
  }

  /**
   * The oldest unacknowledged entries (copies), or null when the peer is up to date. With
   * `after`, only entries whose latest change is above it: the batch that follows one already
   * sent (its `version`) but not yet acknowledged, so one round can send several frames.
   */
  nextBatch(peer: string, after = 0): Result<DeltaBatch | null> {
    const st = this.peers.get(peer);
    if (st === undefined) return err("GQ_ERR_UNKNOWN_PEER", `unknown peer ${peer}`);
    if (st.buffer.size === 0) return ok(null);
    const entries: DeltaEntry[] = [];
    let version = 0;
    for (const [key, b] of st.buffer) {
      if (b.version <= after) continue;
      if (entries.length >= this.maxEntriesPerFrame) break;
      entries.push({ key, record: KeyRecord.copy(b.record) });
      version = b.version;
    }
    return ok(entries.length === 0 ? null : { version, entries });
  }

  /** Applies a peer's ack. Idempotent; stale, repeated and future versions are harmless. */
  ack(peer: string, version: number): Result<void> {
    const st = this.peers.get(peer);
    if (st === undefined) return err("GQ_ERR_UNKNOWN_PEER", `unknown peer ${peer}`);
    if (version <= st.acked || version > this.current) return ok(undefined);
    st.acked = version;
    // Entries are in version order: drop the acknowledged prefix.
    for (const [key, b] of st.buffer) {
      if (b.version > version) break;
      st.buffer.delete(key);
    }
    return ok(undefined);
  }

  ackedVersion(peer: string): number | undefined {
    return this.peers.get(peer)?.acked;
  }

  bufferedKeys(peer: string): number {
    return this.peers.get(peer)?.buffer.size ?? 0;
  }

  /** True when the peer's buffer overflowed (or the peer joined late) and it needs the full state. */
  needsFullSync(peer: string): boolean {
    return this.peers.get(peer)?.fullSync ?? false;
  }

  /** How often the peer's buffer overflowed (a metric). */
  overflowCount(peer: string): number {
    return this.peers.get(peer)?.overflows ?? 0;
  }

  /** Call once the full state (or a digest round) has been sent to the peer. */
  markSynced(peer: string): void {
    const st = this.peers.get(peer);
    if (st !== undefined) st.fullSync = false;
  }
}
