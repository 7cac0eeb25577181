// Section 4: CRDT merges (runCrdtBench) and the gossip wire cost: real delta
// frames from the crdt codec, shipped through a DeltaShipper, for N active
// keys of which 1% change per round. References measured here too: a plain
// Map.set loop (merges/s) and JSON of the same entries (bytes).
import { DeltaShipper, encodeFrame, KeyRecord, runCrdtBench } from "@geoquota/crdt";
import type { Budget } from "./types.js";

const REPLICAS = ["us-east.k7f3q2", "eu-west.a9x2mb", "ap-south.zz81qe"] as const;
const PEER = "eu-west";
const CHURN = 0.01;

export interface GossipBytes {
  readonly activeKeys: number;
  readonly changedKeysPerRound: number;
  readonly frames: number;
  readonly bytesPerRoundPerPeer: number;
  readonly bytesPerChangedKey: number;
  /** JSON.stringify of the same entries, bytes (the reference encoding). */
  readonly jsonBytesPerRoundPerPeer: number;
}

export interface CrdtGossipResult {
  readonly counterMergesPerSecond: number;
  /** Plain Map.set of the same number of entries per second (reference). */
  readonly mapSetsPerSecond: number;
  readonly mergesVsMapSet: number;
  readonly encodeDecodeFramesPerSecond: number;
  readonly bytesPerChangedKey: { readonly name: string; readonly bytes: number }[];
  readonly gossip: GossipBytes[];
}

function keyOf(i: number): string {
  return `tenant-${String(i).padStart(6, "0")}|payments_checkout`;
}

/** What a region ships for a changed key: every replica's admitted counter it knows, plus its denials. */
function record(i: number, round: number): KeyRecord {
  const r = KeyRecord.initial();
  for (const [j, id] of REPLICAS.entries()) r.consumed.p.set(id, 10_000 + i * 7 + round * 13 + j);
  r.denied.set(REPLICAS[0], round + (i % 5));
  return r;
}

function gossipBytes(activeKeys: number, rounds: number): GossipBytes {
  const shipper = new DeltaShipper({ peers: [PEER], maxBufferedKeys: activeKeys, maxEntriesPerFrame: 1000 });
  const changed = Math.max(1, Math.round(activeKeys * CHURN));
  let bytes = 0;
  let json = 0;
  let frames = 0;
  for (let round = 0; round < rounds; round++) {
    // A different 1% each round (strided so consecutive rounds do not overlap).
    for (let k = 0; k < changed; k++)
      shipper.record(keyOf((round * changed + k) % activeKeys), record(k, round));
    for (let guard = 0; guard < 1000; guard++) {
      const next = shipper.nextBatch(PEER);
      if (!next.ok || next.value === null) break;
      const batch = next.value;
      const frame = {
        kind: "delta" as const,
        from: "us-east",
        version: batch.version,
        entries: batch.entries,
      };
      bytes += encodeFrame(frame).byteLength;
      json += Buffer.byteLength(
        JSON.stringify(frame, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v)),
      );
      frames++;
      shipper.ack(PEER, batch.version);
    }
  }
  return {
    activeKeys,
    changedKeysPerRound: changed,
    frames: frames / rounds,
    bytesPerRoundPerPeer: bytes / rounds,
    bytesPerChangedKey: bytes / rounds / changed,
    jsonBytesPerRoundPerPeer: json / rounds,
  };
}

function mapSetsPerSecond(minMs: number): number {
  const keys = Array.from({ length: 8 }, (_, i) => `region-${i}.inc${i}`);
  const maps = Array.from({ length: 1000 }, () => new Map<string, number>());
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  for (let round = 0; elapsed < minMs && round < 1_000_000; round++) {
    for (const m of maps) for (const k of keys) m.set(k, round);
    n += maps.length * keys.length;
    elapsed = performance.now() - start;
  }
  return n / (elapsed / 1000);
}

export function benchCrdtGossip(budget: Budget): CrdtGossipResult {
  const minMs = budget.smoke ? 200 : 1000;
  const crdt = runCrdtBench({ minDurationMs: minMs });
  const sets = mapSetsPerSecond(minMs);
  const rounds = budget.smoke ? 3 : 10;
  return {
    counterMergesPerSecond: crdt.counterMergesPerSecond,
    mapSetsPerSecond: sets,
    mergesVsMapSet: crdt.counterMergesPerSecond / sets,
    encodeDecodeFramesPerSecond: crdt.encodeDecodeFramesPerSecond,
    bytesPerChangedKey: crdt.bytes.map((b) => ({ name: b.name, bytes: b.bytesPerChangedKey })),
    gossip: [gossipBytes(10_000, rounds), gossipBytes(100_000, rounds)],
  };
}
