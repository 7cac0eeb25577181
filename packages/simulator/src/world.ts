// The world of one run: the seed's random streams, the simulated clock and
// network, and the regions (each a Redis model, its clock offset, its leased
// clients, what its daemon and limiters are doing). Every other part of the
// run (run.ts) reads and changes the world; nothing else is shared.
import type { Timing } from "@geoquota/core";
import type { GossipDaemon } from "@geoquota/gossip";
import { encodeSnapshot, seedState, snapshotOf } from "@geoquota/rollout";
import { Rng, SimClock, SimNetwork } from "@geoquota/sim";
import type { Policies, PolicyView } from "./policies.js";
import { ModelRedis } from "./region.js";
import type { ModelOptions } from "./types.js";

/** Redis TIME is epoch µs: large, so a fresh cluster (born 0) is long past any recovery. */
export const EPOCH_US = 1_700_000_000_000_000;
/** WAIT timeout of the gossip store (limiter gossip.ts default 100 ms). */
export const WAIT_TIMEOUT_US = 100_000;
/** redis-port primaryCheckMs as main.ts sets it. */
export const PRIMARY_CHECK_US = 1_000_000;
/** limiterStaleMs of the simulated regions: a limiter decides with a snapshot read at most this long ago. */
export const LIMITER_STALE_US = 500_000;
/** The replication stream catches up at least this often (when not stalled). */
export const REPLICA_STREAM_MAX_US = 200_000;
/** How long before a failover the replica's content is materialised (see ModelRedis.armReplica). */
export const REPLICA_ARM_US = 2_500_000;

/** The Redis settings the primary watchers re-check on every tick (replication.ts SETUP_SETTINGS). */
export type SetupSetting = "maxmemory-policy" | "replicas";
export const SETUP_SETTINGS: readonly SetupSetting[] = ["maxmemory-policy", "replicas"];

export interface ClientLease {
  readonly id: string;
  readonly tokens: number;
  used: number;
  /** Real instant the client stops using it (send + granted duration − margin). */
  readonly stopAtUs: number;
  /** The region's Redis it was granted by (a failover may forget it). */
  readonly expiryLocalUs: number;
}

export interface Client {
  readonly name: string;
  seq: number;
  lease: ClientLease | undefined;
  acquiring: boolean;
}

export interface Node {
  readonly id: string;
  readonly index: number;
  /** Redis clock − real time; changed only by a scripted clock step. */
  offsetUs: number;
  readonly redis: ModelRedis;
  /** The policy its limiters enforce: from the last snapshot they read (kept while unknown, for the checkers). */
  view: PolicyView;
  /** The limiters' last successful snapshot read: usable until sentUs + limiterStaleMs. */
  limiterRead: { readonly raw: string; readonly sentUs: number } | undefined;
  daemon: GossipDaemon | undefined;
  /** Incremented when a daemon starts or dies: a dead life's timers and commands go nowhere. */
  life: number;
  /** FIFO of the daemon's Redis connection: a command never runs before one sent earlier. */
  fifoUs: number;
  demandPerSec: number;
  readonly clients: Client[];
  /** Replication stream stopped until this real instant. */
  stalledUntilUs: number;
  /** The settings the limiter process's primary watcher found unsafe at its last tick (it fails closed). */
  readonly limiterDrift: Set<SetupSetting>;
  /** Real instants of this region's scheduled failovers (a WAIT near one reconnects behind the address). */
  readonly failoversAt: number[];
  /** Eviction windows open now (FaultOptions.evictions), and whether memory pressure started in them. */
  evictionWindows: number;
  pressure: boolean;
  /** Bumped by a failover: the eviction loop of the old primary stops (the new one's starts at its first tick). */
  server: number;
}

/** Counts of what happened, for the result. */
export interface RunStats {
  leases: number;
  failovers: number;
  lostWrites: number;
  waitFailures: number;
  undurable: number;
  lateReplicas: number;
  evictions: number;
  reconnectedWaits: number;
  clockExclusions: number;
  clockResumes: number;
}

/** A checker failed: the run stops (run.ts catches it and reports `failure`). */
export class CheckFailed extends Error {}

export interface World {
  readonly opts: ModelOptions;
  readonly clock: SimClock;
  readonly net: SimNetwork<Uint8Array>;
  /** The streams of the seed, one per concern (their order of creation is part of the replay). */
  readonly workRng: Rng;
  readonly faultRng: Rng;
  readonly redisRng: Rng;
  readonly daemonRng: Rng;
  readonly policyRng: Rng;
  readonly durableRng: Rng;
  /** Issue 21's faults (late replicas, evictions, failovers behind one address): drawn only when a run has them. */
  readonly driftRng: Rng;
  readonly timing: Timing;
  readonly ids: readonly string[];
  readonly nodes: readonly Node[];
  readonly policies: Policies;
  readonly stats: RunStats;
  /** Set by an event that may have resumed the daemon's async code: the run drains the microtasks. */
  asyncTouched: boolean;
  /** A daemon reported an error (its onError). */
  asyncError: string | undefined;
  /** Set at the heal (durationUs): the faults that are draws per event stop then. */
  faultsHealed: boolean;
  /** Cleared at the heal: no more arrivals, partitions or early closes. */
  demandOn: boolean;
  failure: string | undefined;
  /** The region's Redis TIME now. */
  localNow(node: Node): number;
  /** The real instant of a region's Redis TIME. */
  realOf(node: Node, localUs: number): number;
  /** Records the failure and stops the run. */
  fail(msg: string): never;
  /**
   * Breakpoints of a region's share become (no-op) events, so the per-event
   * check also runs at every instant a share changes without a script.
   */
  scheduleBreakpoints(node: Node): void;
}

export function createWorld(
  opts: ModelOptions,
  createPoliciesOf: (ids: readonly string[]) => Policies,
): World {
  const rng = new Rng(opts.seed);
  const clock = new SimClock(0);
  const net = new SimNetwork<Uint8Array>({
    clock,
    rng: rng.fork(),
    defaultLink: {
      dropRate: opts.faults.dropRate,
      duplicateRate: opts.faults.duplicateRate,
      latencyUs: (r) => r.int(opts.faults.latencyMinUs, opts.faults.latencyMaxUs),
    },
  });
  const workRng = rng.fork();
  const faultRng = rng.fork();
  const redisRng = rng.fork();
  const daemonRng = rng.fork();
  const policyRng = rng.fork();
  const durableRng = rng.fork();
  // Issue 21's faults (late replicas, evictions, failovers behind one address): their own
  // stream, drawn only when a run has them, so the other draws stay what they were.
  const driftRng = rng.fork();
  // Leased mode (config `leased.enabled`) wherever clients may run, as the
  // limiter and the daemon's Redis port configure it: the recovery lease hold.
  const timing: Timing = {
    epsilonUs: opts.epsilonUs,
    loanDurationUs: opts.loanDurationUs,
    leasedMode: opts.clients.perRegionMax > 0,
  };
  const n = opts.regions;
  const ids = Array.from({ length: n }, (_, i) => `r${i}`);
  const half = Math.floor(opts.clockSpreadUs / 2);
  const policies = createPoliciesOf(ids);

  const nodes: Node[] = ids.map((id, i) => {
    // The extremes ±spread/2 are drawn often: the bound is tight there.
    const offsetUs = i < 2 && opts.clockSpreadUs > 0 ? (i === 0 ? -half : half) : workRng.int(-half, half);
    const clients: Client[] = [];
    const k = opts.clients.perRegionMax > 0 ? workRng.int(0, opts.clients.perRegionMax) : 0;
    for (let c = 0; c < k; c++)
      clients.push({ name: `${id}c${c}`, seq: 0, lease: undefined, acquiring: false });
    // A fresh cluster: the CLI orchestrator seeds every region's Redis (seedSnapshot).
    const raw = encodeSnapshot(snapshotOf(seedState(id, ids, policies.seedPolicies), 1, 0));
    const redis = new ModelRedis(id, timing, opts.bugs, EPOCH_US + offsetUs);
    redis.seedPolicy(raw);
    return {
      id,
      index: i,
      offsetUs,
      redis,
      view: policies.viewOfSnapshot(i, raw).view,
      limiterRead: { raw, sentUs: 0 },
      daemon: undefined,
      life: 0,
      fifoUs: 0,
      demandPerSec: 0,
      clients,
      stalledUntilUs: 0,
      limiterDrift: new Set<SetupSetting>(),
      failoversAt: [],
      evictionWindows: 0,
      pressure: false,
      server: 0,
    };
  });
  const pending = new Set<number>();
  const world: World = {
    opts,
    clock,
    net,
    workRng,
    faultRng,
    redisRng,
    daemonRng,
    policyRng,
    durableRng,
    driftRng,
    timing,
    ids,
    nodes,
    policies,
    stats: {
      leases: 0,
      failovers: 0,
      lostWrites: 0,
      waitFailures: 0,
      undurable: 0,
      lateReplicas: 0,
      evictions: 0,
      reconnectedWaits: 0,
      clockExclusions: 0,
      clockResumes: 0,
    },
    asyncTouched: false,
    asyncError: undefined,
    faultsHealed: false,
    demandOn: true,
    failure: undefined,
    localNow: (node) => clock.nowUs() + EPOCH_US + node.offsetUs,
    realOf: (node, localUs) => localUs - EPOCH_US - node.offsetUs,
    fail(msg: string): never {
      world.failure = `seed ${opts.seed} (replay: GQ_SEED=${opts.seed}) at t=${clock.nowUs()} µs: ${msg}`;
      throw new CheckFailed(world.failure);
    },
    scheduleBreakpoints(node) {
      for (const bp of node.redis.breakpoints(node.view.limit, world.localNow(node))) {
        const real = world.realOf(node, bp);
        if (pending.has(real)) continue;
        pending.add(real);
        clock.at(real, () => pending.delete(real));
      }
    },
  };
  return world;
}
