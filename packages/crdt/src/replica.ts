// An in-memory replica: the keyed CRDT map, its mutators, delta shipping to
// peers and digest anti-entropy, speaking the codec's frame types. The gossip
// daemon keeps its state in Redis and may use DeltaShipper directly; this
// class is what the simulations drive, and a reference for the protocol:
//
//   each round, per peer:  nextDeltaFrame(peer) → send; if needsFullSync(peer) → fullSyncFrames(peer)
//   on delta:              receiveDelta(frame) → send back the returned ack (if any)
//   on ack:                receiveAck(frame)
//   periodically:          digestFrame() → send; on digest: repairFrames(frame) → send back
import { CrdtMap } from "./keyed-map.js";
import type { AckFrame, DeltaFrame, DigestFrame } from "./codec.js";
import { computeDigest, type DigestScope, keysToRepair } from "./digest.js";
import { err, type Result } from "./errors.js";
import { checkId, isValidKey, regionOfReplica } from "./ids.js";
import type { LoanConflict } from "./loans.js";
import { KeyRecord } from "./record.js";
import { type DeltaEntry, DeltaShipper } from "./shipper.js";

export interface ReplicaOptions {
  /** This node's id in frames (`from`) and as a lender/borrower: the region id. */
  id: string;
  /** Counter replica id `<region>.<incarnation>`; defaults to `<id>.0`. */
  replicaId?: string;
  peers: readonly string[];
  /**
   * Forward changes received from one peer to the others. Costs traffic in a
   * full mesh, but keeps data flowing around a one-way or partial partition.
   * Default true.
   */
  relay?: boolean;
  maxBufferedKeys?: number;
  maxEntriesPerFrame?: number;
  startVersion?: number;
  /**
   * Join used on receipt. Only for tests that prove the simulation's checkers
   * catch a broken join; production code never sets it.
   */
  mergeKeyInto?: (map: CrdtMap, key: string, record: KeyRecord, conflicts?: LoanConflict[]) => boolean;
}

export interface ReceiveReport {
  /** Keys whose state changed. */
  changedKeys: number;
  /** Equal-seq loan conflicts met while merging. */
  conflicts: LoanConflict[];
  /** The ack to send back, or null for frames outside the ack stream (version 0). */
  ack: AckFrame | null;
}

export class Replica {
  readonly id: string;
  readonly replicaId: string;
  readonly state: CrdtMap = CrdtMap.initial();
  readonly shipper: DeltaShipper;
  private readonly relay: boolean;
  private readonly maxEntriesPerFrame: number;
  /** The test-only join of `mergeKeyInto`, when given (then whole records are shipped on). */
  private readonly customJoin: ReplicaOptions["mergeKeyInto"];

  constructor(opts: ReplicaOptions) {
    const bad = checkId(opts.id, "replica node id");
    if (bad !== undefined) throw new TypeError(bad.message);
    this.id = opts.id;
    this.replicaId = opts.replicaId ?? `${opts.id}.0`;
    this.relay = opts.relay ?? true;
    this.maxEntriesPerFrame = opts.maxEntriesPerFrame ?? 1_000;
    this.customJoin = opts.mergeKeyInto;
    this.shipper = new DeltaShipper({
      peers: opts.peers.filter((p) => p !== opts.id),
      ...(opts.maxBufferedKeys !== undefined && { maxBufferedKeys: opts.maxBufferedKeys }),
      maxEntriesPerFrame: this.maxEntriesPerFrame,
      ...(opts.startVersion !== undefined && { startVersion: opts.startVersion }),
    });
  }

  get region(): string {
    return regionOfReplica(this.replicaId);
  }

  private record(key: string): KeyRecord {
    return this.state.get(key) ?? KeyRecord.initial();
  }

  /**
   * Merges `record` into the map for `key`: what changed the map (the smallest δ, see
   * CrdtMap.mergeKeyDelta), or null when nothing did. With the test-only `mergeKeyInto`
   * option, the whole record when it changed anything.
   */
  mergeKey(key: string, record: KeyRecord, conflicts?: LoanConflict[]): KeyRecord | null {
    if (this.customJoin === undefined) return CrdtMap.mergeKeyDelta(this.state, key, record, conflicts);
    return this.customJoin(this.state, key, record, conflicts) ? record : null;
  }

  /**
   * Applies a local delta (or a whole record read back from storage) and queues for every peer
   * only what it changed: a record holding every replica's counters ships as the few entries
   * that moved.
   */
  applyLocal(key: string, delta: Result<KeyRecord>): Result<KeyRecord> {
    if (!delta.ok) return delta;
    // Only keys that survive the codec may enter the map.
    if (!isValidKey(key))
      return err("GQ_ERR_INVALID_KEY", `invalid key ${JSON.stringify(key).slice(0, 300)}`);
    const changed = this.mergeKey(key, delta.value);
    if (changed !== null) this.shipper.record(key, changed);
    return delta;
  }

  consume(key: string, amount: number): Result<KeyRecord> {
    return this.applyLocal(key, KeyRecord.consume(this.record(key), this.replicaId, amount));
  }

  refund(key: string, amount: number): Result<KeyRecord> {
    return this.applyLocal(key, KeyRecord.refund(this.record(key), this.replicaId, amount));
  }

  deny(key: string, amount: number): Result<KeyRecord> {
    return this.applyLocal(key, KeyRecord.deny(this.record(key), this.replicaId, amount));
  }

  /** This node lends to borrower. */
  grantLoan(
    key: string,
    loan: { borrower: string; units: number; deadlineUs: number; seq: number },
  ): Result<KeyRecord> {
    return this.applyLocal(key, KeyRecord.grantLoan(this.record(key), { lender: this.id, ...loan }));
  }

  /** This node (the borrower) returns lender's loan `seq` early. */
  returnLoan(key: string, ret: { lender: string; seq: number }): Result<KeyRecord> {
    return this.applyLocal(key, KeyRecord.returnLoan(this.record(key), { borrower: this.id, ...ret }));
  }

  /** The next delta frame for peer (after the one of version `after`, see DeltaShipper.nextBatch), or null. */
  nextDeltaFrame(peer: string, after = 0): DeltaFrame | null {
    const batch = this.shipper.nextBatch(peer, after);
    if (!batch.ok || batch.value === null) return null;
    return { kind: "delta", from: this.id, version: batch.value.version, entries: batch.value.entries };
  }

  /** The full state in frames outside the ack stream (version 0); clears the peer's full-sync flag. */
  fullSyncFrames(peer: string): DeltaFrame[] {
    this.shipper.markSynced(peer);
    return this.framesFor([...this.state.keys()]);
  }

  receiveDelta(frame: DeltaFrame): ReceiveReport {
    const conflicts: LoanConflict[] = [];
    let changedKeys = 0;
    for (const { key, record } of frame.entries) {
      const changed = this.mergeKey(key, record, conflicts);
      if (changed !== null) {
        changedKeys++;
        if (this.relay) this.shipper.record(key, changed, frame.from);
      }
    }
    const ack: AckFrame | null =
      frame.version > 0 ? { kind: "ack", from: this.id, version: frame.version } : null;
    return { changedKeys, conflicts, ack };
  }

  receiveAck(frame: AckFrame): Result<void> {
    return this.shipper.ack(frame.from, frame.version);
  }

  digestFrame(scope: DigestScope = { bucket: 0, bucketCount: 1 }): DigestFrame {
    const entries = [...computeDigest(this.state, scope)].map(([key, hash]) => ({ key, hash }));
    return { kind: "digest", from: this.id, bucket: scope.bucket, bucketCount: scope.bucketCount, entries };
  }

  /** Full records of the keys the digest's sender lacks or holds differently (version-0 frames). */
  repairFrames(digest: DigestFrame): DeltaFrame[] {
    const remote = new Map(digest.entries.map((e) => [e.key, e.hash] as const));
    return this.framesFor(keysToRepair(this.state, remote, digest));
  }

  private framesFor(keys: string[]): DeltaFrame[] {
    const frames: DeltaFrame[] = [];
    for (let i = 0; i < keys.length; i += this.maxEntriesPerFrame)
      frames.push(this.stateFrame(keys.slice(i, i + this.maxEntriesPerFrame)));
    return frames;
  }

  /**
   * One frame outside the ack stream (version 0) of these keys' full records as the map holds
   * them now (keys it lacks are left out): a full sync built a frame at a time, so a large map
   * is never copied whole.
   */
  stateFrame(keys: readonly string[]): DeltaFrame {
    const entries: DeltaEntry[] = [];
    for (const key of keys) {
      const r = this.state.get(key);
      if (r !== undefined) entries.push({ key, record: KeyRecord.copy(r) });
    }
    return { kind: "delta", from: this.id, version: 0, entries };
  }
}
