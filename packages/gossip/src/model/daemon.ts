// The model daemon of one region: what packages/gossip runs for real, minus
// sockets and Redis. Each round it ships its record to every peer as a delta
// (acked, via the crdt DeltaShipper) and every few rounds whole (anti-entropy,
// so a region that lost its state re-learns everything), then runs the
// policy: early returns first (they only lower its own share), then grants.
// All its memory (shipper, policy memory) is lost on a restart.
import { DeltaShipper, type KeyRecord } from "@geoquota/crdt";
import {
  type CounterReading,
  decideRound,
  initialPolicyMemory,
  type PolicyMemory,
  type RegionQuota,
} from "../policy/index.js";
import type { ModelRegion } from "./region.js";

export type Frame =
  | { readonly t: "delta"; readonly version: number; readonly record: KeyRecord }
  | { readonly t: "ack"; readonly version: number }
  | { readonly t: "full"; readonly record: KeyRecord };

export const MODEL_KEY = "tenant|resource";

export interface DaemonEnv {
  readonly region: ModelRegion;
  readonly peers: readonly string[];
  readonly quotas: readonly RegionQuota[];
  readonly refillPerSecond: number;
  readonly fullSyncEveryRounds: number;
  /** The region's Redis TIME. */
  nowUs(): number;
  send(to: string, frame: Frame): void;
  /** Called after a script that may have changed the loan book. */
  touched(): void;
  /** Bug (b): lend from the current share, floor 0, ignoring reservations. */
  readonly relendBorrowed: boolean;
}

export interface DaemonStats {
  grants: number;
  returns: number;
}

export class ModelDaemon {
  private readonly env: DaemonEnv;
  private readonly shipper: DeltaShipper;
  private memory: PolicyMemory = initialPolicyMemory();
  private rounds = 0;
  readonly stats: DaemonStats;

  constructor(env: DaemonEnv, stats: DaemonStats) {
    this.env = env;
    this.stats = stats;
    // Versions above any a previous life sent, so its late acks drop nothing new.
    this.shipper = new DeltaShipper({ peers: env.peers, startVersion: env.nowUs() });
    env.region.dirty = true;
  }

  round(): void {
    const env = this.env;
    const region = env.region;
    this.rounds++;
    this.policyRound();
    if (region.dirty) {
      this.shipper.record(MODEL_KEY, region.record());
      region.dirty = false;
    }
    const full = this.rounds === 1 || this.rounds % env.fullSyncEveryRounds === 0;
    for (const peer of env.peers) {
      if (full || this.shipper.needsFullSync(peer)) {
        env.send(peer, { t: "full", record: region.record() });
        this.shipper.markSynced(peer);
      }
      const batch = this.shipper.nextBatch(peer);
      if (!batch.ok || batch.value === null) continue;
      const entry = batch.value.entries[0];
      if (entry !== undefined)
        env.send(peer, { t: "delta", version: batch.value.version, record: entry.record });
    }
  }

  receive(from: string, frame: Frame): void {
    const env = this.env;
    if (frame.t === "ack") {
      this.shipper.ack(from, frame.version);
      return;
    }
    env.region.merge(frame.record, env.nowUs());
    env.touched();
    if (frame.t === "delta") env.send(from, { t: "ack", version: frame.version });
  }

  private policyRound(): void {
    const env = this.env;
    const region = env.region;
    const now = env.nowUs();
    const reading: { admitted: Record<string, number>; denied: Record<string, number> } = {
      admitted: {},
      denied: {},
    };
    for (const [field, v] of region.key.counters) {
      if (field.startsWith("p|")) reading.admitted[field.slice(2)] = v;
      else if (field.startsWith("d|")) reading.denied[field.slice(2)] = v;
    }
    const recovering = region.recovering(now);
    let quotas = env.quotas;
    let reserved = region.reserved(now);
    if (env.relendBorrowed) {
      const share = region.shareAt(now);
      quotas = quotas.map((q) => (q.region === region.id ? { ...q, baseShare: share, floorShare: 0 } : q));
      reserved = {};
    }
    const d = decideRound(this.memory, {
      self: region.id,
      regions: quotas,
      refillPerSecond: env.refillPerSecond,
      nowUs: now,
      counters: reading as CounterReading,
      recovering: recovering && !env.relendBorrowed,
      reserved,
      current: region.current(now),
      inUse: region.inUse(now),
    });
    this.memory = d.memory;
    for (const l of d.returns) {
      if (region.giveBack(l.lender, now)) this.stats.returns++;
    }
    for (const [borrower, units] of Object.entries(d.grants)) {
      if (units > 0 && region.grant(borrower, units, now)) this.stats.grants++;
    }
    if (d.returns.length > 0 || Object.keys(d.grants).length > 0) env.touched();
  }
}
