// Micro-benchmarks behind `pnpm tsx packages/crdt/bench/merge.bench.ts` and a
// later `geoquota bench`. Returns numbers; printing is the caller's business.
// The clock is injected (default performance.now) to keep this module free of
// ambient time for everything but the benchmark itself.
import { decodeFrame, encodeFrame } from "./codec.js";
import { GCounter } from "./gcounter.js";
import { KeyRecord } from "./record.js";
import type { DeltaEntry } from "./shipper.js";

export interface CrdtBenchOptions {
  /** Milliseconds clock. Default performance.now. */
  now?: () => number;
  /** Minimum measured time per merge benchmark. Default 500 ms. */
  minDurationMs?: number;
  /** Changed keys in the encoded delta frame. Default 1 000. */
  changedKeys?: number;
}

export interface BytesScenario {
  name: string;
  frameBytes: number;
  bytesPerChangedKey: number;
}

export interface CrdtBenchResult {
  /** G-Counter entries merged per second, every entry a real update (higher value). */
  counterMergesPerSecond: number;
  /** Entries per second when nothing changes (duplicate delivery). */
  counterNoopMergesPerSecond: number;
  /** Encoded bytes per changed key in delta frames of `changedKeys` keys. */
  bytes: BytesScenario[];
  encodeDecodeFramesPerSecond: number;
  changedKeys: number;
}

const REPLICAS = ["us-east-1.k7f3q2", "eu-west-1.a9x2mb", "ap-south-1.zz81qe"];
const ENTRIES_PER_COUNTER = 8;
const COUNTERS = 1_000;
const ROUNDS = 32;

function replicaIds(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `region-${i % 5}.inc${i}`);
}

function measureMerges(now: () => number, minMs: number, changing: boolean): number {
  const ids = replicaIds(ENTRIES_PER_COUNTER);
  // Pre-built rounds of deltas with increasing values: every merge is an update.
  const rounds: GCounter[][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const round: GCounter[] = [];
    for (let c = 0; c < COUNTERS; c++) {
      const m: GCounter = new Map();
      for (let e = 0; e < ENTRIES_PER_COUNTER; e++) m.set(ids[e] as string, changing ? r * 10 + e + c : 5);
      round.push(m);
    }
    rounds.push(round);
  }
  let entries = 0;
  let sink = 0;
  const start = now();
  let elapsed = 0;
  while (elapsed < minMs) {
    const targets: GCounter[] = Array.from({ length: COUNTERS }, () => new Map());
    for (const round of rounds) {
      for (let c = 0; c < COUNTERS; c++) {
        if (GCounter.mergeInto(targets[c] as GCounter, round[c] as GCounter)) sink++;
      }
      entries += COUNTERS * ENTRIES_PER_COUNTER;
    }
    elapsed = now() - start;
  }
  if (sink < 0) throw new Error("unreachable");
  return entries / (elapsed / 1000);
}

function tenantKey(i: number): string {
  return `tenant-${String(i).padStart(5, "0")}|api.search`;
}

function frameBytes(entries: DeltaEntry[]): number {
  return encodeFrame({ kind: "delta", from: "us-east-1", version: 1_732_000_000_000_000, entries })
    .byteLength;
}

function bytesScenarios(changedKeys: number): BytesScenario[] {
  const own = REPLICAS[0] as string;
  const scenario = (name: string, build: (i: number) => KeyRecord): BytesScenario => {
    const entries = Array.from({ length: changedKeys }, (_, i) => ({ key: tenantKey(i), record: build(i) }));
    const bytes = frameBytes(entries);
    return { name, frameBytes: bytes, bytesPerChangedKey: bytes / changedKeys };
  };
  return [
    scenario("admitted only (typical delta)", (i) => {
      const r = KeyRecord.initial();
      r.consumed.p.set(own, 100_000 + i * 37);
      return r;
    }),
    scenario("admitted + denied, fractional", (i) => {
      const r = KeyRecord.initial();
      r.consumed.p.set(own, 1234.5 + i);
      r.denied.set(own, 17.25 + i);
      return r;
    }),
    scenario("full record, 3 regions + loan", (i) => {
      const r = KeyRecord.initial();
      for (const [j, id] of REPLICAS.entries()) {
        r.consumed.p.set(id, 50_000 + i + j);
        r.consumed.n.set(id, 10 + j);
        r.denied.set(id, 300 + j);
      }
      r.loans.set("us-east-1>eu-west-1", {
        lender: "us-east-1",
        borrower: "eu-west-1",
        units: 120_000,
        deadlineUs: 1_732_000_003_000_000 + i,
        seq: 1_732_000_000_000_000 + i,
      });
      return r;
    }),
  ];
}

function measureCodec(now: () => number, minMs: number): number {
  const entries = Array.from({ length: 100 }, (_, i) => {
    const r = KeyRecord.initial();
    r.consumed.p.set(REPLICAS[0] as string, 1000 + i);
    return { key: tenantKey(i), record: r };
  });
  const frame = { kind: "delta" as const, from: "us-east-1", version: 42, entries };
  let n = 0;
  const start = now();
  let elapsed = 0;
  while (elapsed < minMs) {
    for (let i = 0; i < 100; i++) {
      const res = decodeFrame(encodeFrame(frame));
      if (!res.ok) throw new Error(res.error.message);
      n++;
    }
    elapsed = now() - start;
  }
  return n / (elapsed / 1000);
}

export function runCrdtBench(opts: CrdtBenchOptions = {}): CrdtBenchResult {
  const now = opts.now ?? (() => performance.now());
  const minMs = opts.minDurationMs ?? 500;
  const changedKeys = opts.changedKeys ?? 1_000;
  return {
    counterMergesPerSecond: measureMerges(now, minMs, true),
    counterNoopMergesPerSecond: measureMerges(now, minMs, false),
    bytes: bytesScenarios(changedKeys),
    encodeDecodeFramesPerSecond: measureCodec(now, minMs),
    changedKeys,
  };
}
