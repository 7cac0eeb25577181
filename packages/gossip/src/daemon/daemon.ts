// The gossip daemon of one region: every round (uniform in [minMs, maxMs])
// it folds local changes from its Redis into the replicated CRDT map, runs the
// re-weighting policy for every active key (grants, renewals, early returns,
// all executed by Redis scripts with Redis TIME), and ships each peer the
// deltas it has not acknowledged. Frames from peers are validated, merged into
// the map and written into Redis. The daemon holds no authority of its own:
// Redis is the source of truth, the map is a cache that a restart rebuilds.
import {
  CrdtMap,
  type DecodeLimits,
  DEFAULT_LIMITS,
  decodeFrame,
  type DeltaFrame,
  type Frame,
  encodeFrame,
  GCounter,
  KeyRecord,
  type LoanConflict,
  PNCounter,
  Replica,
  decodeKey,
  encodeKey,
} from "@geoquota/crdt";
import type { KeyPolicy } from "@geoquota/limiter";
import {
  type CounterReading,
  DEFAULT_POLICY_OPTIONS,
  decideRound,
  initialPolicyMemory,
  type PolicyMemory,
  type PolicyOptions,
  type RegionQuota,
} from "../policy/index.js";
import { DurableLedger } from "./durable-ledger.js";
import type { DaemonMetrics } from "./metrics.js";
import type { DaemonStore, KeyState } from "./store-port.js";

/** The transport as the daemon sees it (the WebSocket Mesh in production). */
export interface FrameLink {
  send(peer: string, bytes: Uint8Array): boolean;
  isUp(peer: string): boolean;
}

/** Resolves a key's policy for this region and the quotas of all regions. */
export interface PolicyResolver {
  resolve(tenant: string, resource: string): { policy: KeyPolicy; regions: readonly RegionQuota[] };
}

export interface DaemonOptions {
  region: string;
  peers: readonly string[];
  round: { minMs: number; maxMs: number };
  /** Keys read from the change feed per round. */
  dirtyPerRound?: number;
  /** Keys visited per round by the slow full sweep (anti-entropy against a lost change feed). */
  sweepPerRound?: number;
  /** A key with no demand and no loans is dropped from the active set after this long. */
  idleMs?: number;
  /** A digest of one bucket is sent every this many rounds. */
  digestEveryRounds?: number;
  digestBuckets?: number;
  maxBufferedKeys?: number;
  decodeLimits?: Partial<DecodeLimits>;
  policy?: PolicyOptions;
  /** False: never lend or borrow (static slices); counters are still gossiped. */
  reweighting?: boolean;
}

export interface DaemonDeps {
  store: DaemonStore;
  link: FrameLink;
  policies: PolicyResolver;
  metrics?: DaemonMetrics;
  /** Uniform [0, 1): round jitter. */
  random?: () => number;
  /** Monotonic ms. */
  now?: () => number;
  /** Wall-clock ms (Date.now): only seeds the delta versions of this run. */
  wallNowMs?: () => number;
  /** The round timer (setTimeout/clearTimeout); a simulation injects its virtual clock. */
  timers?: DaemonTimers;
  /** Errors that must not stop the daemon (Redis hiccups): counted and reported here. */
  onError?: (where: string, err: unknown) => void;
}

export interface DaemonTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const REAL_TIMERS: DaemonTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface ActiveKey {
  tenant: string;
  resource: string;
  memory: PolicyMemory;
  lastBusyMs: number;
}

export interface DaemonStatus {
  region: string;
  rounds: number;
  lastRoundMs: number;
  activeKeys: number;
  knownKeys: number;
  badFrames: number;
  loansGranted: number;
  loansReturned: number;
  peers: Record<string, { up: boolean; lastHeardMs: number | null; lagMs: number | null }>;
  /** Latest computed shares/targets of a few active keys. */
  sample: Record<string, { targets: Record<string, number>; recovering: boolean }>;
}

export class GossipDaemon {
  private readonly replica: Replica;
  private readonly active = new Map<string, ActiveKey>();
  private readonly pendingMerge = new Set<string>();
  /** Loans and returns a durability wait covered: only those leave the region (DESIGN §4). */
  private readonly durable = new DurableLedger();
  private readonly lastHeard = new Map<string, number>();
  private readonly lastAckLag = new Map<string, number>();
  private readonly sentAt = new Map<string, Map<number, number>>();
  private readonly sample = new Map<string, { targets: Record<string, number>; recovering: boolean }>();
  /** Undefined: the defaults (decodeFrame then reuses one msgpack Decoder instead of building one per frame). */
  private readonly limits: DecodeLimits | undefined;
  private readonly opts: Required<Omit<DaemonOptions, "decodeLimits" | "policy" | "maxBufferedKeys">> & {
    policy: PolicyOptions;
  };
  private timer: unknown;
  private running = false;
  private roundInFlight: Promise<void> | undefined;
  private mergeInFlight: Promise<void> = Promise.resolve();
  private sweepCursor = "0";
  private rounds = 0;
  private lastRoundMs = 0;
  private badFrames = 0;
  private loansGranted = 0;
  private loansReturned = 0;
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly timers: DaemonTimers;

  constructor(
    options: DaemonOptions,
    private readonly deps: DaemonDeps,
  ) {
    this.opts = {
      region: options.region,
      peers: options.peers.filter((p) => p !== options.region),
      round: options.round,
      dirtyPerRound: options.dirtyPerRound ?? 5000,
      sweepPerRound: options.sweepPerRound ?? 200,
      idleMs: options.idleMs ?? 30_000,
      digestEveryRounds: options.digestEveryRounds ?? 10,
      digestBuckets: options.digestBuckets ?? 16,
      policy: options.policy ?? DEFAULT_POLICY_OPTIONS,
      reweighting: options.reweighting ?? true,
    };
    this.limits =
      options.decodeLimits === undefined ? undefined : { ...DEFAULT_LIMITS, ...options.decodeLimits };
    this.replica = new Replica({
      id: options.region,
      peers: this.opts.peers,
      // Versions start from wall-clock µs so that a late ack addressed to the
      // previous run of this daemon cannot acknowledge this run's deltas.
      startVersion: (deps.wallNowMs ?? Date.now)() * 1000,
      ...(options.maxBufferedKeys !== undefined ? { maxBufferedKeys: options.maxBufferedKeys } : {}),
    });
    this.random = deps.random ?? Math.random;
    this.now = deps.now ?? (() => performance.now());
    this.timers = deps.timers ?? REAL_TIMERS;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    await this.roundInFlight;
    await this.mergeInFlight;
  }

  private schedule(): void {
    if (!this.running) return;
    const { minMs, maxMs } = this.opts.round;
    const delay = minMs + this.random() * (maxMs - minMs);
    this.timer = this.timers.setTimeout(() => {
      this.roundInFlight = this.round()
        .catch((err) => this.deps.onError?.("round", err))
        .finally(() => {
          this.roundInFlight = undefined;
          this.schedule();
        });
    }, delay);
  }

  /** A peer came (back) up: it gets our whole state, since we cannot know what it kept. */
  peerUp(peer: string): void {
    this.sendFullSync(peer);
  }

  /** One round. Public so tests can drive rounds without timers. */
  async round(): Promise<void> {
    const t0 = this.now();
    await this.mergeInFlight;
    const keys = new Set<string>();
    for (const k of await this.deps.store.drainDirty(this.opts.dirtyPerRound)) keys.add(k);
    const sweep = await this.deps.store.sweepKeys(this.sweepCursor, this.opts.sweepPerRound);
    this.sweepCursor = sweep.cursor;
    for (const k of sweep.keys) keys.add(k);
    for (const k of this.active.keys()) keys.add(k);
    await Promise.all([...keys].map((k) => this.processKey(k)));
    this.ship();
    this.rounds++;
    if (this.rounds % this.opts.digestEveryRounds === 0) this.sendDigest();
    this.lastRoundMs = this.now() - t0;
    this.deps.metrics?.roundDuration.observe(this.lastRoundMs / 1000);
  }

  private policyFor(key: string) {
    const parts = decodeKey(key);
    if (!parts.ok) return undefined;
    const { tenant, resource } = parts.value;
    try {
      return { tenant, resource, ...this.deps.policies.resolve(tenant, resource) };
    } catch (err) {
      this.deps.onError?.(`policy ${key}`, err);
      return undefined;
    }
  }

  private async processKey(key: string): Promise<void> {
    const p = this.policyFor(key);
    if (!p) return;
    let state: KeyState;
    try {
      state = await this.deps.store.readKey(p.policy);
    } catch (err) {
      this.deps.onError?.(`read ${key}`, err);
      return;
    }
    // A region in recovery lost its Redis state (wiped, or failed over) while
    // this daemon kept running: its map already holds the peers' counters, so
    // nothing they send changes the map and nothing would be merged back.
    // While Redis lacks counters the map holds, merge the map's record in.
    const known = this.replica.state.get(key);
    if (
      state.recovering &&
      known !== undefined &&
      !(
        PNCounter.leq(known.consumed, state.record.consumed) &&
        GCounter.leq(known.denied, state.record.denied)
      )
    ) {
      this.pendingMerge.add(key);
      this.flushMerges();
    }
    this.replica.applyLocal(key, { ok: true, value: await this.durablePart(key, p.policy, state.record) });
    const merged = this.replica.state.get(key) ?? state.record;
    // Only the rate algorithms follow demand (window algorithms keep static slices).
    const algorithm = p.policy.limit.algorithm;
    if (algorithm !== "token_bucket" && algorithm !== "gcra") return;
    if (!this.opts.reweighting) return;

    const entry = this.active.get(key) ?? {
      tenant: p.tenant,
      resource: p.resource,
      memory: initialPolicyMemory(),
      lastBusyMs: this.now(),
    };
    const counters: CounterReading = {
      admitted: Object.fromEntries(merged.consumed.p),
      denied: Object.fromEntries(merged.denied),
    };
    const decision = decideRound(
      entry.memory,
      {
        self: this.opts.region,
        regions: p.regions,
        refillPerSecond: p.policy.limit.refillPerSecond,
        nowUs: state.nowUs,
        counters,
        recovering: state.recovering,
        reserved: state.reserved,
        current: state.current,
        inUse: state.inUse,
        leasePinnedPpm: state.leasePinnedPpm,
      },
      this.opts.policy,
    );
    entry.memory = decision.memory;
    const busy =
      Object.values(decision.memory.demand.ratePerSec).some((r) => r > 1e-9) ||
      Object.keys(state.reserved).length > 0 ||
      state.inUse.length > 0;
    if (busy) entry.lastBusyMs = this.now();
    if (this.now() - entry.lastBusyMs > this.opts.idleMs) this.active.delete(key);
    else this.active.set(key, entry);
    if (this.sample.size < 16 || this.sample.has(key)) {
      // A bounded sample of keys: label cardinality stays fixed.
      this.sample.set(key, { targets: { ...decision.targets }, recovering: state.recovering });
      for (const [region, target] of Object.entries(decision.targets)) {
        this.deps.metrics?.share.set({ key, region }, target);
      }
    }

    // Returns first: they free this region's use before anything else.
    for (const ret of decision.returns) {
      try {
        const mark = await this.deps.store.returnLoan(p.policy, ret.lender, ret.seq);
        if (mark) {
          this.durable.mark(key, "return", `${mark.lender}>${mark.borrower}`, mark.seq);
          this.replica.applyLocal(key, KeyRecord.returnLoan(KeyRecord.initial(), mark));
          this.loansReturned++;
          this.deps.metrics?.loans.inc({ event: "returned" });
        }
      } catch (err) {
        this.deps.onError?.(`return ${key}`, err);
      }
    }
    for (const [borrower, units] of Object.entries(decision.grants)) {
      if (units <= 0) continue;
      // A loan to a region we cannot reach would only be reserved here, never
      // used there: skip it, so a partition returns our share to us within
      // D + ε instead of after the borrower's demand estimate decays.
      if (!this.deps.link.isUp(borrower)) continue;
      try {
        const loan = await this.deps.store.grantLoan(p.policy, borrower, units);
        if (loan) {
          const renewal = (state.current[borrower] ?? 0) > 0;
          this.durable.mark(key, "loan", `${loan.lender}>${loan.borrower}`, loan.seq);
          this.replica.applyLocal(key, KeyRecord.grantLoan(KeyRecord.initial(), loan));
          this.loansGranted++;
          this.deps.metrics?.loans.inc({ event: renewal ? "renewed" : "granted" });
        } else this.deps.metrics?.loans.inc({ event: "refused" });
      } catch (err) {
        this.deps.onError?.(`grant ${key}`, err);
      }
    }
  }

  /**
   * The part of a record read back from Redis that may leave the region: its
   * loans and returns only once a durability wait started after the read
   * succeeded (a grant whose own WAIT failed is still in Redis and would
   * otherwise ship with the next round's read).
   */
  private async durablePart(key: string, policy: KeyPolicy, record: KeyRecord): Promise<KeyRecord> {
    if (!this.durable.pending(key, record)) return record;
    let ok = false;
    try {
      ok = await this.deps.store.waitDurable(policy);
    } catch (err) {
      this.deps.onError?.(`wait ${key}`, err);
    }
    if (ok) this.durable.certify(key, record);
    else this.deps.metrics?.loans.inc({ event: "held" });
    return this.durable.durablePart(key, record);
  }

  private send(peer: string, frame: Frame): boolean {
    const bytes = encodeFrame(frame);
    const ok = this.deps.link.send(peer, bytes);
    if (ok) {
      this.deps.metrics?.bytesOut.inc({ peer }, bytes.byteLength);
      this.deps.metrics?.framesOut.inc({ peer, kind: frame.kind });
    }
    return ok;
  }

  private ship(): void {
    for (const peer of this.opts.peers) {
      if (!this.deps.link.isUp(peer)) continue;
      if (this.replica.shipper.needsFullSync(peer)) {
        this.sendFullSync(peer);
        continue;
      }
      const frame = this.replica.nextDeltaFrame(peer);
      if (!frame) continue;
      if (this.send(peer, frame)) {
        let sent = this.sentAt.get(peer);
        if (!sent) {
          sent = new Map();
          this.sentAt.set(peer, sent);
        }
        sent.set(frame.version, this.now());
        if (sent.size > 64) sent.delete(sent.keys().next().value as number);
      }
    }
  }

  private sendFullSync(peer: string): void {
    if (!this.deps.link.isUp(peer)) return;
    for (const frame of this.replica.fullSyncFrames(peer)) {
      if (frame.entries.length > 0) this.send(peer, frame);
    }
  }

  private digestRound = 0;
  private sendDigest(): void {
    const scope = {
      bucket: this.digestRound++ % this.opts.digestBuckets,
      bucketCount: this.opts.digestBuckets,
    };
    const frame = this.replica.digestFrame(scope);
    for (const peer of this.opts.peers) if (this.deps.link.isUp(peer)) this.send(peer, frame);
  }

  /** A binary frame from an authenticated peer. Bad frames are counted and dropped. */
  onFrame(peer: string, bytes: Uint8Array): void {
    this.deps.metrics?.bytesIn.inc({ peer }, bytes.byteLength);
    const decoded = decodeFrame(bytes, this.limits);
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
    this.lastHeard.set(peer, this.now());
    this.deps.metrics?.framesIn.inc({ peer, kind: frame.kind });
    switch (frame.kind) {
      case "delta":
        this.onDelta(peer, frame);
        return;
      case "ack": {
        const sent = this.sentAt.get(peer)?.get(frame.version);
        if (sent !== undefined) {
          this.lastAckLag.set(peer, this.now() - sent);
          this.deps.metrics?.lag.set({ peer }, (this.now() - sent) / 1000);
        }
        const r = this.replica.receiveAck(frame);
        if (!r.ok) this.bad(peer, r.error.code);
        return;
      }
      case "digest":
        for (const f of this.replica.repairFrames(frame)) this.send(peer, f);
        return;
    }
  }

  private bad(peer: string, reason: string): void {
    this.badFrames++;
    this.deps.metrics?.badFrames.inc({ peer, reason });
  }

  private onDelta(peer: string, frame: DeltaFrame): void {
    const conflicts: LoanConflict[] = [];
    for (const { key, record } of frame.entries) {
      if (!this.policyFor(key)) continue;
      if (CrdtMap.mergeKeyInto(this.replica.state, key, record, conflicts)) {
        // Relay: keeps data flowing around a one-way or partial partition.
        this.replica.shipper.record(key, record, frame.from);
        // Into Redis too: every region's counter entries live there (for the
        // quota view and re-learning after a restart), loans to us take effect.
        this.pendingMerge.add(key);
      }
    }
    if (conflicts.length > 0) this.deps.metrics?.conflicts.inc(conflicts.length);
    if (frame.version > 0) this.send(peer, { kind: "ack", from: this.opts.region, version: frame.version });
    this.flushMerges();
  }

  /** Writes merged remote state into Redis, serialized so merges never interleave with a round's reads. */
  private flushMerges(): void {
    this.mergeInFlight = this.mergeInFlight.then(async () => {
      const keys = [...this.pendingMerge];
      this.pendingMerge.clear();
      await Promise.all(
        keys.map(async (key) => {
          const p = this.policyFor(key);
          const record = this.replica.state.get(key);
          if (!p || !record) return;
          try {
            await this.deps.store.mergeRemote(p.policy, record);
            // A key peers are busy with is worth a policy run here too.
            if (!this.active.has(key)) {
              this.active.set(key, {
                tenant: p.tenant,
                resource: p.resource,
                memory: initialPolicyMemory(),
                lastBusyMs: this.now(),
              });
            }
          } catch (err) {
            this.deps.onError?.(`merge ${key}`, err);
          }
        }),
      );
    });
  }

  status(): DaemonStatus {
    const peers: DaemonStatus["peers"] = {};
    for (const p of this.opts.peers) {
      const heard = this.lastHeard.get(p);
      peers[p] = {
        up: this.deps.link.isUp(p),
        lastHeardMs: heard === undefined ? null : Math.round(this.now() - heard),
        lagMs: this.lastAckLag.get(p) ?? null,
      };
    }
    return {
      region: this.opts.region,
      rounds: this.rounds,
      lastRoundMs: this.lastRoundMs,
      activeKeys: this.active.size,
      knownKeys: this.replica.state.size,
      badFrames: this.badFrames,
      loansGranted: this.loansGranted,
      loansReturned: this.loansReturned,
      peers,
      sample: Object.fromEntries(this.sample),
    };
  }

  /** For tests: the replicated record of a key. */
  recordOf(tenant: string, resource: string): KeyRecord | undefined {
    const key = encodeKey(tenant, resource);
    return key.ok ? this.replica.state.get(key.value) : undefined;
  }
}
