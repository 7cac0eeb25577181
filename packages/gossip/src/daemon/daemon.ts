// The gossip daemon of one region: every round (uniform in [minMs, maxMs])
// it folds local changes from its Redis into the replicated CRDT map, runs the
// re-weighting policy for every key that changed or is watched (policy-step.ts:
// grants, renewals, early returns, all executed by Redis scripts with Redis
// TIME), and ships each peer the deltas it has not acknowledged (frames.ts,
// which also validates and merges what peers send; merged keys are written
// into Redis here, serialized with the rounds). A round's work follows the
// keys that changed, not the keys that exist (issue 24 point 7). The daemon holds no authority of its
// own: Redis is the source of truth, the map is a cache a restart rebuilds.
import type { KeyPolicy } from "@geoquota/core";
import {
  type DecodeLimits,
  DEFAULT_LIMITS,
  decodeKey,
  encodeKey,
  GCounter,
  KeyRecord,
  PNCounter,
  Replica,
} from "@geoquota/crdt";
import { DEFAULT_POLICY_OPTIONS, type PolicyOptions } from "../policy/index.js";
import { type ClockCheckOptions, PeerClocks } from "./clock-offsets.js";
import { DurableLedger } from "./durable-ledger.js";
import { FrameHandling, type FrameLink } from "./frames.js";
import type { DaemonMetrics } from "./metrics.js";
import { PolicyStep, type DaemonKey } from "./policy-step.js";
import { isRolloutFrame } from "./rollout-frame.js";
import type { RolloutStatus, RolloutStep } from "./rollout-step.js";
import type { DaemonStore, KeyReading, PolicyResolver } from "./store-port.js";

export type { FrameLink } from "./frames.js";

export type { PolicyResolver } from "./store-port.js";

export interface DaemonOptions {
  region: string;
  peers: readonly string[];
  /**
   * Rounds come uniformly in [minMs, maxMs]; while some key's targets are moving (the round
   * before replaced them) the next comes in [fastMs, 2·fastMs] instead, so a shift in demand
   * is followed within a few short rounds rather than a few long ones (issue 24 point 6).
   * Still jittered, and bounded below by fastMs: a burst of shifts cannot spin the daemon.
   * Default: minMs / 4 (50 ms at the default minMs of 200).
   */
  round: { minMs: number; maxMs: number; fastMs?: number };
  /**
   * Keys read from the change feed per round at most (in calls of up to 10,000): enough for 1%
   * of a million keys changing in every one of ten regions (each merge marks its key changed).
   */
  dirtyPerRound?: number;
  /** Keys visited per round by the slow full sweep (anti-entropy against a lost change feed). */
  sweepPerRound?: number;
  /**
   * The demand estimate of a key that holds no loans and whose targets are the bases is
   * forgotten this long after its last run if its demand was under 10% of every base rate
   * (memoryMs), else after idleMs (policy-step.ts).
   */
  idleMs?: number;
  /** See idleMs. Default 4 · maxMs. */
  memoryMs?: number;
  /** A digest of one bucket is sent every this many rounds. */
  digestEveryRounds?: number;
  digestBuckets?: number;
  maxBufferedKeys?: number;
  decodeLimits?: Partial<DecodeLimits>;
  policy?: PolicyOptions;
  /** False: never lend or borrow (static slices); counters are still gossiped. */
  reweighting?: boolean;
  /**
   * The clock check (DESIGN §1.2 "Checked"): every round the daemon sends
   * each peer its Redis TIME and estimates each peer's offset; a peer whose
   * offset may exceed the margin gets no loans and its loans are returned.
   * Absent: no check (tests of other parts; production always passes it).
   */
  clockCheck?: ClockCheckOptions;
}

/** A peer entered or left the clock exclusion (log it once). */
export interface ClockChange {
  readonly peer: string;
  readonly excluded: boolean;
  readonly reason: string;
  readonly offsetUs: number | undefined;
  readonly uncertaintyUs: number | undefined;
}

export interface DaemonDeps {
  store: DaemonStore;
  link: FrameLink;
  policies: PolicyResolver;
  /**
   * Replicated policy versions (issue 15): merged from peers' frames, stepped
   * every round; while it does not know the region's policy the daemon
   * processes no key. Absent: `policies` is static (one region, or
   * `policy.replicated: false`).
   */
  rollout?: RolloutStep;
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
  /** The clock check took a peer out of lending or let it back in. */
  onClockChange?: (change: ClockChange) => void;
}

export interface DaemonTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** pendingMerge: write the map's whole record (not only what changed). */
const FULL = "full";

/** What woke the daemon (wake()): its limiters, or a peer's frame. */
type WakeSource = "limiter" | "peer";

/** Keys of one peer frame looked at for a wake (wakeOnPeerShift): bounds the cost of a busy frame. */
const PEER_WAKE_LOOKS = 64;

/** The store's largest drain per call (@geoquota/redis drainDirty). */
const DRAIN_CALL_MAX = 10_000;
/** Keys a round processes at once: enough to keep Redis pipelined, few enough to bound memory. */
const KEYS_IN_FLIGHT = 256;
/**
 * Changed keys buffered per peer until it acknowledges them; past it, the peer gets a full
 * sync instead (crdt DeltaShipper). Several rounds of 1% of a million keys changing.
 */
export const MAX_BUFFERED_KEYS = 100_000;

/** `fn` over `items`, at most `limit` at once; results in item order. */
async function eachLimited<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const REAL_TIMERS: DaemonTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface DaemonStatus {
  region: string;
  rounds: number;
  lastRoundMs: number;
  /** Keys run every round whether or not they changed (loans, targets off the bases). */
  activeKeys: number;
  /** Keys whose demand estimate is kept (run lately, or watched). */
  memoryKeys: number;
  knownKeys: number;
  badFrames: number;
  loansGranted: number;
  loansReturned: number;
  peers: Record<string, { up: boolean; lastHeardMs: number | null; lagMs: number | null }>;
  /** Latest computed shares/targets of a few active keys. */
  sample: Record<string, { targets: Record<string, number>; recovering: boolean }>;
  /** The replicated policy versions (absent: static policies). */
  policy?: RolloutStatus;
  /** Per peer, the clock check's view (absent: the check is off). */
  clock?: Record<
    string,
    { offsetUs: number | null; uncertaintyUs: number | null; excluded: boolean; reason: string }
  >;
}

export class GossipDaemon {
  private readonly replica: Replica;
  /**
   * Keys to write into Redis, each with the counter entries peers changed since its last merge
   * (FULL: the map's whole record, a region in recovery re-learning what it lost).
   */
  private readonly pendingMerge = new Map<string, KeyRecord | typeof FULL>();
  /** Loans and returns that a durability wait covered (what may leave the region). */
  private readonly durable = new DurableLedger();
  private readonly frames: FrameHandling;
  private readonly policy: PolicyStep;
  private readonly clocks: PeerClocks | undefined;
  private readonly opts: Required<
    Omit<DaemonOptions, "decodeLimits" | "policy" | "maxBufferedKeys" | "clockCheck">
  > & {
    policy: PolicyOptions;
  };
  private timer: unknown;
  private running = false;
  private roundInFlight: Promise<void> | undefined;
  private mergeInFlight: Promise<void> = Promise.resolve();
  private sweepCursor = "0";
  private rounds = 0;
  private lastRoundMs = 0;
  /** The last round replaced some key's targets (the next round comes sooner). */
  private sharesMoving = false;
  /** When the pending round timer fires (this.now() ms); see wake(). */
  private timerDueMs = 0;
  /** The last wake of each source (wake()): each brings at most one round forward per minMs. */
  private readonly lastWakeMs = new Map<WakeSource, number>();
  private wakeNext = false;
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
      dirtyPerRound: options.dirtyPerRound ?? 200_000,
      sweepPerRound: options.sweepPerRound ?? 200,
      idleMs: options.idleMs ?? 30_000,
      memoryMs: options.memoryMs ?? 4 * options.round.maxMs,
      digestEveryRounds: options.digestEveryRounds ?? 10,
      digestBuckets: options.digestBuckets ?? 16,
      policy: options.policy ?? DEFAULT_POLICY_OPTIONS,
      reweighting: options.reweighting ?? true,
    };
    this.replica = new Replica({
      id: options.region,
      peers: this.opts.peers,
      // Versions start from wall-clock µs so that a late ack addressed to the
      // previous run of this daemon cannot acknowledge this run's deltas.
      startVersion: (deps.wallNowMs ?? Date.now)() * 1000,
      maxBufferedKeys: options.maxBufferedKeys ?? MAX_BUFFERED_KEYS,
    });
    this.random = deps.random ?? Math.random;
    this.now = deps.now ?? (() => performance.now());
    this.timers = deps.timers ?? REAL_TIMERS;
    if (options.clockCheck !== undefined) {
      if (deps.store.redisTimeUs === undefined)
        throw new Error("clock check: the store cannot read Redis TIME");
      this.clocks = new PeerClocks(this.opts.peers, options.clockCheck);
      // Every peer starts excluded (no estimate yet): its series start at 1.
      for (const peer of this.opts.peers) {
        deps.metrics?.clockExcluded.set({ peer }, 1);
        deps.metrics?.clockExclusions.inc({ peer }, 0);
      }
    }
    this.frames = new FrameHandling({
      region: this.opts.region,
      peers: this.opts.peers,
      replica: this.replica,
      link: deps.link,
      metrics: deps.metrics,
      limits: options.decodeLimits === undefined ? undefined : { ...DEFAULT_LIMITS, ...options.decodeLimits },
      digestBuckets: this.opts.digestBuckets,
      now: this.now,
      // While the policy is unknown every valid key is kept (merged into the
      // map, written into Redis once the policy is known): a full sync sent
      // then is not sent again.
      knows: (key) => !this.policyKnown() || this.policyFor(key) !== undefined,
      onMerged: (changes, from) => {
        for (const { key, delta } of changes) this.queueMerge(key, delta);
        this.flushMerges();
        this.wakeOnPeerShift(changes, from);
      },
      linksFreshMs: 4 * this.opts.round.maxMs,
      onClock: (peer, frame) => {
        const clocks = this.clocks;
        const r = clocks?.incoming(peer, frame, this.now() * 1000);
        if (r?.ok) {
          deps.metrics?.clockOffset.set({ peer }, r.estimate.offsetUs / 1e6);
          deps.metrics?.clockUncertainty.set({ peer }, r.estimate.uncertaintyUs / 1e6);
          // Judge the new estimate at once, not at this region's next round: a
          // peer sends its clock frame before the round's loan grants on the
          // same link, so a loan granted on a clock that just stepped ahead
          // (its deadline read that far too late) is refused
          // (withoutExcludedLoans) instead of replacing the one in use for up
          // to a round, and this region's next round returns the old one.
          if (clocks !== undefined) this.clockEvaluate(clocks);
        }
      },
    });
    this.policy = new PolicyStep({
      region: this.opts.region,
      policy: this.opts.policy,
      idleMs: this.opts.idleMs,
      memoryMs: this.opts.memoryMs,
      minRoundMs: this.opts.round.minMs,
      store: deps.store,
      link: deps.link,
      replica: this.replica,
      durable: this.durable,
      metrics: deps.metrics,
      now: this.now,
      onError: deps.onError,
      excluded: (peer) => this.clocks?.excluded(peer) ?? false,
    });
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

  private fastMs(): number {
    const { minMs } = this.opts.round;
    return Math.min(minMs, this.opts.round.fastMs ?? minMs / 4);
  }

  private schedule(): void {
    if (!this.running) return;
    const { minMs, maxMs } = this.opts.round;
    const fastMs = this.fastMs();
    const fast = this.sharesMoving || this.wakeNext;
    this.wakeNext = false;
    this.arm(fast ? fastMs + this.random() * fastMs : minMs + this.random() * (maxMs - minMs));
  }

  private arm(delay: number): void {
    this.timerDueMs = this.now() + delay;
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      this.roundInFlight = this.round()
        .catch((err) => this.deps.onError?.("round", err))
        .finally(() => {
          this.roundInFlight = undefined;
          this.schedule();
        });
    }, delay);
  }

  /** Whether wake(by) now would bring a round forward (cheap: callers look for a reason only then). */
  private mayWake(by: WakeSource): boolean {
    if (!this.running) return false;
    const now = this.now();
    const last = this.lastWakeMs.get(by);
    if (last !== undefined && now - last < this.opts.round.minMs) return false;
    return this.timer === undefined || this.timerDueMs - now > 2 * this.fastMs();
  }

  /**
   * Demand crossed a slice (DESIGN §3 "Demand, targets and lending"): this region's limiter
   * started denying a key (`limiter`), or a peer's counters would move a key's targets here or
   * a loan this region granted came back (`peer`, wakeOnPeerShift). The next round comes in
   * [fastMs, 2·fastMs] instead of at the timer's end, so the shift is seen a round sooner here
   * and what it calls for (returns, grants) shipped. Still jittered, and at most one early round
   * per minMs from each source: nothing that keeps waking can spin the daemon. (One budget for
   * both let a limiter's wake, in the old hot region, hold back the peer's that tells it the hot
   * spot moved.)
   */
  wake(by: WakeSource = "limiter"): void {
    if (!this.running) return;
    const now = this.now();
    const last = this.lastWakeMs.get(by);
    if (last !== undefined && now - last < this.opts.round.minMs) return;
    this.lastWakeMs.set(by, now);
    const fastMs = this.fastMs();
    if (this.timer === undefined) {
      this.wakeNext = true; // a round is running: the one after it comes fast
      return;
    }
    if (this.timerDueMs - now <= 2 * fastMs) return;
    this.timers.clearTimeout(this.timer);
    this.deps.metrics?.wakes.inc({ by });
    this.arm(fastMs + this.random() * fastMs);
  }

  /**
   * A peer's frame changed the map: wake when it calls for a round here. A return of a loan
   * this region granted frees share to lend; a key whose denials grew somewhere (a region's
   * demand past its slice) is looked at with this round's counters, and wakes when its targets
   * would move as much as a fast round's (policy-step.ts wouldMove: nothing is kept). Only while
   * a wake can take effect, at most PEER_WAKE_LOOKS keys per frame.
   */
  private wakeOnPeerShift(changes: readonly { key: string; delta: KeyRecord }[], from: string): void {
    if (!this.opts.reweighting || !this.mayWake("peer")) return;
    if (this.peerShift(changes, from)) this.wake("peer");
  }

  /** Whether one of `changes` calls for an early round (wakeOnPeerShift). */
  private peerShift(changes: readonly { key: string; delta: KeyRecord }[], from: string): boolean {
    let looked = 0;
    for (const { key, delta } of changes) {
      for (const m of delta.returned.values()) if (m.lender === this.opts.region) return true;
      if (delta.denied.size === 0 || looked >= PEER_WAKE_LOOKS) continue;
      looked++;
      const p = this.policyFor(key);
      const merged = this.replica.state.get(key);
      if (p !== undefined && merged !== undefined && this.policy.wouldMove(key, p, merged, from)) return true;
    }
    return false;
  }

  /** A peer came (back) up: it gets our whole state, since we cannot know what it kept. */
  peerUp(peer: string): void {
    this.sendRollout(peer);
    this.frames.sendFullSync(peer);
  }

  private sendRollout(peer: string): void {
    const frame = this.deps.rollout?.outgoingFrame();
    if (frame !== undefined && this.deps.link.isUp(peer)) this.deps.link.send(peer, frame);
  }

  /** A binary frame from an authenticated peer (frames.ts). Bad frames are counted and dropped. */
  onFrame(peer: string, bytes: Uint8Array): void {
    if (this.deps.rollout !== undefined && isRolloutFrame(bytes)) {
      const { error, reply } = this.deps.rollout.onFrame(peer, bytes);
      if (error !== undefined) {
        this.frames.countBad(peer, "GQ_ERR_ROLLOUT_FRAME");
        this.deps.onError?.(`rollout-frame ${peer}`, new Error(error));
      }
      if (reply) this.sendRollout(peer);
      return;
    }
    this.frames.onFrame(peer, bytes);
  }

  /**
   * The clock check's part of a round: read Redis TIME, re-evaluate every
   * peer (before this round's loans are decided), send each reachable peer
   * its stamp. A failed read sends nothing: estimates age out, peers are excluded.
   */
  private async clockStep(): Promise<void> {
    const clocks = this.clocks;
    const readTime = this.deps.store.redisTimeUs;
    if (clocks === undefined || readTime === undefined) return;
    const m0 = this.now() * 1000;
    let redisUs: number;
    try {
      redisUs = await readTime.call(this.deps.store);
    } catch (err) {
      this.deps.onError?.("clock", err);
      this.clockEvaluate(clocks);
      return;
    }
    clocks.localRead(redisUs, m0, this.now() * 1000);
    this.clockEvaluate(clocks);
    for (const peer of this.opts.peers) {
      const stamp = clocks.outgoing(peer);
      if (stamp === undefined || !this.deps.link.isUp(peer)) continue;
      this.frames.send(peer, { kind: "clock", from: this.opts.region, ...stamp });
    }
  }

  private clockEvaluate(clocks: PeerClocks): void {
    for (const peer of clocks.evaluate(this.now() * 1000)) {
      const v = clocks.view(peer);
      if (v === undefined) continue;
      this.deps.metrics?.clockExcluded.set({ peer }, v.excluded ? 1 : 0);
      if (v.excluded) this.deps.metrics?.clockExclusions.inc({ peer });
      this.deps.onClockChange?.({
        peer,
        excluded: v.excluded,
        reason: v.reason,
        offsetUs: v.estimate?.offsetUs,
        uncertaintyUs: v.estimate?.uncertaintyUs,
      });
    }
  }

  /** One round. Public so tests can drive rounds without timers. */
  async round(): Promise<void> {
    const t0 = this.now();
    await this.mergeInFlight;
    await this.clockStep();
    const rollout = this.deps.rollout;
    if (rollout !== undefined) {
      try {
        await rollout.round();
      } catch (err) {
        this.deps.onError?.("rollout", err);
      }
      for (const peer of this.opts.peers) this.sendRollout(peer);
      if (!rollout.known) {
        this.rounds++;
        this.lastRoundMs = this.now() - t0;
        return;
      }
      if (this.pendingMerge.size > 0) {
        this.flushMerges();
        await this.mergeInFlight;
      }
    }
    const keys = new Set<string>();
    for (let budget = this.opts.dirtyPerRound; budget > 0; ) {
      const ask = Math.min(budget, DRAIN_CALL_MAX);
      const drained = await this.deps.store.drainDirty(ask);
      for (const k of drained) keys.add(k);
      budget -= ask;
      if (drained.length < ask) break;
    }
    const sweep = await this.deps.store.sweepKeys(this.sweepCursor, this.opts.sweepPerRound);
    this.sweepCursor = sweep.cursor;
    for (const k of sweep.keys) keys.add(k);
    for (const k of this.policy.roundKeys()) keys.add(k);
    const moved = await eachLimited([...keys], KEYS_IN_FLIGHT, (k) => this.processKey(k));
    this.sharesMoving = moved.includes(true);
    if (this.sharesMoving) this.deps.metrics?.fastRounds.inc();
    this.frames.sendLinks();
    this.frames.ship();
    this.rounds++;
    if (this.rounds % this.opts.digestEveryRounds === 0) this.frames.sendDigest();
    this.lastRoundMs = this.now() - t0;
    this.deps.metrics?.roundDuration.observe(this.lastRoundMs / 1000);
  }

  private policyKnown(): boolean {
    return this.deps.rollout === undefined || this.deps.rollout.known;
  }

  private policyFor(key: string): DaemonKey | undefined {
    if (this.deps.rollout !== undefined && !this.deps.rollout.known) return undefined;
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

  /**
   * Folds the key's Redis state into the map (durable part only), then runs its policy step.
   * True when the key's targets moved this round.
   */
  private async processKey(key: string): Promise<boolean> {
    const p = this.policyFor(key);
    if (!p) return false;
    let state: KeyReading;
    try {
      state = await this.deps.store.readKey(p.policy);
    } catch (err) {
      this.deps.onError?.(`read ${key}`, err);
      return false;
    }
    this.mergeBackMissing(key, state);
    this.replica.applyLocal(key, { ok: true, value: await this.durablePart(key, p.policy, state) });
    // A loan or return no wait covered yet stays in Redis: read it again next round.
    const undurable = this.durable.pending(key, state.record);
    const merged = this.replica.state.get(key) ?? state.record;
    // Only the rate algorithms follow demand (window algorithms keep static slices).
    const algorithm = p.policy.limit.algorithm;
    const reweighted = (algorithm === "token_bucket" || algorithm === "gcra") && this.opts.reweighting;
    if (!reweighted) {
      this.policy.watchUndurable(key, undurable);
      return false;
    }
    return this.policy.run(key, p, state, merged, undurable);
  }

  /**
   * Redis lacks counter entries the map holds: the region lost its Redis
   * state (wiped, failed over: recovery) while this daemon kept running, or
   * the key expired here while idle. Its map already holds the peers'
   * counters, so nothing they send changes the map, and merges carry only
   * what changed: merge the map's whole record in. (A key with a merge still
   * queued gets it first.)
   */
  private mergeBackMissing(key: string, state: KeyReading): void {
    const known = this.replica.state.get(key);
    if (
      !this.pendingMerge.has(key) &&
      known !== undefined &&
      !(
        PNCounter.leq(known.consumed, state.record.consumed) &&
        GCounter.leq(known.denied, state.record.denied)
      )
    ) {
      this.queueMerge(key, FULL);
      this.flushMerges();
    }
  }

  /**
   * The part of a record read back from Redis that may leave the region: its
   * loans and returns only once a durability certificate covers the read (a
   * WAIT sent after the read replied, on the connection the read went out on,
   * with no reconnect since it was issued: `state.readTicket`). A grant whose
   * own WAIT failed is still in Redis and would otherwise ship with the next
   * round's read; a read answered by a server reached after a reconnect may
   * hold records the promoted one lacks.
   */
  private async durablePart(key: string, policy: KeyPolicy, state: KeyReading): Promise<KeyRecord> {
    const record = state.record;
    if (!this.durable.pending(key, record)) return record;
    let ok = false;
    try {
      ok = await this.deps.store.waitDurable(policy, state.readTicket);
    } catch (err) {
      this.deps.onError?.(`wait ${key}`, err);
    }
    if (ok) this.durable.certify(key, record);
    else this.deps.metrics?.loans.inc({ event: "held" });
    return this.durable.durablePart(key, record);
  }

  /** Adds what changed `key` in the map to what its next merge writes into Redis. */
  private queueMerge(key: string, delta: KeyRecord | typeof FULL): void {
    const cur = this.pendingMerge.get(key);
    if (cur === FULL) return;
    if (cur === undefined || delta === FULL)
      this.pendingMerge.set(key, delta === FULL ? FULL : KeyRecord.copy(delta));
    else KeyRecord.mergeInto(cur, delta);
  }

  /**
   * Writes merged remote state into Redis, serialized so merges never interleave with a round's
   * reads: the counter entries that changed (Redis keeps the max of each, so the others need not
   * travel again), and every loan and return mark the map holds for the key (a loan once held
   * back from an excluded lender goes in with the next merge). A merge that fails is queued again.
   */
  private flushMerges(): void {
    // Kept until the policy is known (the round flushes them then).
    if (!this.policyKnown()) return;
    this.mergeInFlight = this.mergeInFlight.then(async () => {
      const batch = [...this.pendingMerge];
      this.pendingMerge.clear();
      await eachLimited(batch, KEYS_IN_FLIGHT, async ([key, delta]) => {
        const p = this.policyFor(key);
        const record = this.replica.state.get(key);
        if (!p || !record) return;
        const toWrite: KeyRecord =
          delta === FULL
            ? record
            : {
                consumed: delta.consumed,
                denied: delta.denied,
                loans: record.loans,
                returned: record.returned,
              };
        try {
          await this.deps.store.mergeRemote(p.policy, this.withoutExcludedLoans(toWrite));
          this.policy.activate(key);
        } catch (err) {
          this.queueMerge(key, delta);
          this.deps.onError?.(`merge ${key}`, err);
        }
      });
    });
  }

  /**
   * A record without the loans to this region from lenders the clock check
   * excludes: those are not taken into use (the map keeps them; they are
   * merged once the lender is back in range, if still live then).
   */
  private withoutExcludedLoans(record: KeyRecord): KeyRecord {
    const clocks = this.clocks;
    if (clocks === undefined) return record;
    let loans: KeyRecord["loans"] | undefined;
    for (const [k, loan] of record.loans) {
      if (loan.borrower !== this.opts.region || !clocks.excluded(loan.lender)) continue;
      loans ??= new Map(record.loans);
      loans.delete(k);
    }
    return loans === undefined ? record : { ...record, loans };
  }

  status(): DaemonStatus {
    const peers: DaemonStatus["peers"] = {};
    for (const p of this.opts.peers) peers[p] = this.frames.peerStatus(p);
    return {
      region: this.opts.region,
      rounds: this.rounds,
      lastRoundMs: this.lastRoundMs,
      activeKeys: this.policy.activeCount,
      memoryKeys: this.policy.memoryCount,
      knownKeys: this.replica.state.size,
      badFrames: this.frames.badFrames,
      loansGranted: this.policy.loansGranted,
      loansReturned: this.policy.loansReturned,
      peers,
      sample: Object.fromEntries(this.policy.sample),
      ...(this.deps.rollout !== undefined ? { policy: this.deps.rollout.status() } : {}),
      ...(this.clocks !== undefined ? { clock: this.clockStatus(this.clocks) } : {}),
    };
  }

  private clockStatus(clocks: PeerClocks): NonNullable<DaemonStatus["clock"]> {
    const out: NonNullable<DaemonStatus["clock"]> = {};
    for (const peer of this.opts.peers) {
      const v = clocks.view(peer);
      if (v === undefined) continue;
      out[peer] = {
        offsetUs: v.estimate === undefined ? null : Math.round(v.estimate.offsetUs),
        uncertaintyUs: v.estimate === undefined ? null : Math.round(v.estimate.uncertaintyUs),
        excluded: v.excluded,
        reason: v.reason,
      };
    }
    return out;
  }

  /** For tests: the replicated record of a key. */
  recordOf(tenant: string, resource: string): KeyRecord | undefined {
    const key = encodeKey(tenant, resource);
    return key.ok ? this.replica.state.get(key.value) : undefined;
  }
}
