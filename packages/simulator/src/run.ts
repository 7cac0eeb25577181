// The whole-protocol simulation (VOPR-style): N regions, each the production
// GossipDaemon (round driver, policy, drain/merge/return, frames) over a
// simulated network and clock, with its Redis replaced by the pure model
// behind the same DaemonStore port. Around them: a shifting random workload
// of checks and in-process leased clients, policy changes, and faults
// (drop/dup/reorder/delay, partitions, state losses, daemon restarts, replica
// stalls and WAIT timeouts, failovers that lose writes, daemons down during a
// failover). The checkers run after EVERY event, exactly (no tolerance):
//   - Σ_i s_i(t) ≤ U at the real instant t, each s_i read at its own clock
//     (t + offset_i); the instants where a share changes without a script
//     (deadline ± ε, recovery end, lease expiry) are scheduled as events;
//   - leases: Σ_i max(C·s_i, U·(leased_i + max(0, bucket_i))) ≤ C·U (DESIGN §3,
//     the global form of "leased + bucket ≤ capacity of the pinned share");
//   - G1 at every admission (WindowOracle), with a policy change: the old
//     bound before it, max(C_old, C_new) + max(r_old, r_new)·T over all, the
//     new bound once every region applied it and leases from before expired;
//   - at the end, after healing and a quiet phase: counters converged.
// Integer µs everywhere; all randomness from the seed. The daemon is async:
// after an event that may have resumed it, the run drains the microtask
// queue before the next event, so a seed replays exactly.
import { parsePolicies, type PolicySet, resolveEffective } from "@geoquota/config";
import { capacityOf, isRateAlgorithm, type KeyLimit, SHARE_UNITS as U, type Timing } from "@geoquota/core";
import type { KeyPolicy } from "@geoquota/core";
import { decodeSnapshot, encodeSnapshot, idKey, seedState, snapshotOf } from "@geoquota/rollout";
import { Rng, SimClock, SimNetwork, WindowOracle } from "@geoquota/sim";
import {
  type DaemonStore,
  type DaemonTimers,
  GossipDaemon,
  type RegionQuota,
  RolloutStep,
  rolloutPolicyResolver,
} from "@geoquota/gossip";
import { ModelRedis } from "./region.js";
import {
  createModelDaemonStore,
  createModelRolloutPort,
  keyLimitOf,
  MODEL_RESOURCE,
  MODEL_TENANT,
} from "./store.js";
import type { ModelOptions, ModelResult } from "./types.js";

/** Redis TIME is epoch µs: large, so a fresh cluster (born 0) is long past any recovery. */
const EPOCH_US = 1_700_000_000_000_000;
/** WAIT timeout of the gossip store (limiter gossip.ts default 100 ms). */
const WAIT_TIMEOUT_US = 100_000;
/** redis-port primaryCheckMs as main.ts sets it. */
const PRIMARY_CHECK_US = 1_000_000;
/** limiterStaleMs of the simulated regions: a limiter decides with a snapshot read at most this long ago. */
const LIMITER_STALE_US = 500_000;
/** The replication stream catches up at least this often (when not stalled). */
const REPLICA_STREAM_MAX_US = 200_000;
/** How long before a failover the replica's content is materialised (see ModelRedis.armReplica). */
const REPLICA_ARM_US = 2_500_000;

interface ClientLease {
  readonly id: string;
  readonly tokens: number;
  used: number;
  /** Real instant the client stops using it (send + granted duration − margin). */
  readonly stopAtUs: number;
  /** The region's Redis it was granted by (a failover may forget it). */
  readonly expiryLocalUs: number;
}

interface Client {
  readonly name: string;
  seq: number;
  lease: ClientLease | undefined;
  acquiring: boolean;
}

interface PolicyView {
  readonly policy: KeyPolicy;
  readonly limit: KeyLimit;
  readonly regions: readonly RegionQuota[];
}

interface Node {
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

/** The Redis settings the primary watchers re-check on every tick (replication.ts SETUP_SETTINGS). */
type SetupSetting = "maxmemory-policy" | "replicas";
const SETUP_SETTINGS: readonly SetupSetting[] = ["maxmemory-policy", "replicas"];

interface PolicySpec {
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly bases: readonly number[];
}

/** The policies file of a spec (regions/policies.json shape): weights are the bases (they sum to U). */
function policiesFileOf(
  spec: PolicySpec,
  ids: readonly string[],
  algorithm: string,
  floorPpm: number,
  windowMs: number | undefined,
): unknown {
  const weights: Record<string, number> = {};
  ids.forEach((id, i) => {
    weights[id] = spec.bases[i] ?? 0;
  });
  return {
    default: {
      algorithm,
      capacity: spec.capacity,
      // A window algorithm's refill is derived (C per window); parsePolicies refuses one.
      ...(windowMs !== undefined ? { windowMs } : { refillPerSecond: spec.refillPerSecond }),
      weights,
      floorPpm,
    },
  };
}

class CheckFailed extends Error {}

function basesFor(n: number, rng: Rng | undefined, floorPpm: number): number[] {
  if (rng === undefined) {
    return Array.from({ length: n }, (_, i) =>
      i === 0 ? U - Math.floor(U / n) * (n - 1) : Math.floor(U / n),
    );
  }
  // Random weights, each ≥ floor, summing to exactly U.
  const raw = Array.from({ length: n }, () => rng.int(1, 10));
  const total = raw.reduce((a, b) => a + b, 0);
  const spare = U - n * floorPpm;
  const out = raw.map((w) => floorPpm + Math.floor((spare * w) / total));
  out[0] = (out[0] ?? 0) + U - out.reduce((a, b) => a + b, 0);
  return out;
}

export async function runModel(opts: ModelOptions): Promise<ModelResult> {
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
  const stats = {
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
  };
  let failure: string | undefined;
  let asyncError: string | undefined;
  let worstShareExcess = Number.NEGATIVE_INFINITY;
  let denied = 0;
  const pending = new Set<number>();
  /** Set by an event that may have resumed the daemon's async code. */
  let asyncTouched = false;

  const fail = (msg: string): never => {
    failure = `seed ${opts.seed} (replay: GQ_SEED=${opts.seed}) at t=${clock.nowUs()} µs: ${msg}`;
    throw new CheckFailed(failure);
  };

  // ---- policies: the spec in force, and each region's applied view
  const windowAlg = !isRateAlgorithm(opts.algorithm);
  const windowMs = windowAlg ? (opts.windowMs ?? 1000) : undefined;
  const oldSpec: PolicySpec = {
    capacity: opts.capacity,
    refillPerSecond: opts.refillPerSecond,
    bases: basesFor(n, undefined, opts.floorPpm),
  };
  const viewOf = (index: number, spec: PolicySpec): PolicyView => {
    const regions: RegionQuota[] = ids.map((region, i) => ({
      region,
      baseShare: spec.bases[i] ?? 0,
      floorShare: opts.floorPpm,
    }));
    const policy: KeyPolicy = {
      tenant: MODEL_TENANT,
      resource: MODEL_RESOURCE,
      limit: {
        algorithm: opts.algorithm,
        capacity: spec.capacity,
        refillPerSecond: spec.refillPerSecond,
        ...(windowMs !== undefined ? { windowMs } : {}),
      },
      baseShare: spec.bases[index] ?? 0,
      floorShare: opts.floorPpm,
    };
    return { policy, limit: keyLimitOf(policy), regions };
  };

  // ---- the replicated policy (issue 15): seed snapshots, and the limiters' view of a snapshot
  const parsePolicy = (raw: unknown, label: string): PolicySet => parsePolicies(raw, label, ids);
  const seedPolicies = policiesFileOf(oldSpec, ids, opts.algorithm, opts.floorPpm, windowMs);
  const parsedDocs = new Map<string, PolicySet>();
  const snapshotViews = new Map<string, { view: PolicyView; completedProposal: string | undefined }>();
  /** What a limiter of `index` enforces from snapshot `raw`: resolveEffective over its docs. */
  const viewOfSnapshot = (index: number, raw: string) => {
    const cached = snapshotViews.get(`${index}\n${raw}`);
    if (cached !== undefined) return cached;
    const d = decodeSnapshot(raw);
    if (!d.ok) throw new Error(`model: ${d.error}`);
    const sets = d.value.docs.map((doc) => {
      const k = `${idKey(doc)}:${doc.proposalId ?? ""}`;
      let set = parsedDocs.get(k);
      if (set === undefined) {
        set = parsePolicy(doc.policies, idKey(doc));
        parsedDocs.set(k, set);
      }
      return set;
    });
    const resolve = (region: string) =>
      resolveEffective(sets, ids, region, MODEL_TENANT, MODEL_RESOURCE, { floorPpm: opts.floorPpm });
    const policy = resolve(ids[index] ?? "");
    const regions: RegionQuota[] = ids.map((region) => {
      const p = resolve(region);
      return { region, baseShare: p.baseShare, floorShare: p.floorShare };
    });
    const value = {
      view: { policy, limit: keyLimitOf(policy), regions },
      completedProposal: d.value.docs[0]?.proposalId,
    };
    if (snapshotViews.size > 10_000) snapshotViews.clear();
    snapshotViews.set(`${index}\n${raw}`, value);
    return value;
  };

  const nodes: Node[] = ids.map((id, i) => {
    // The extremes ±spread/2 are drawn often: the bound is tight there.
    const offsetUs = i < 2 && opts.clockSpreadUs > 0 ? (i === 0 ? -half : half) : workRng.int(-half, half);
    const clients: Client[] = [];
    const k = opts.clients.perRegionMax > 0 ? workRng.int(0, opts.clients.perRegionMax) : 0;
    for (let c = 0; c < k; c++)
      clients.push({ name: `${id}c${c}`, seq: 0, lease: undefined, acquiring: false });
    return {
      id,
      index: i,
      offsetUs,
      redis: new ModelRedis(id, timing, opts.bugs, EPOCH_US + offsetUs),
      view: viewOf(i, oldSpec),
      limiterRead: undefined,
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
  // A fresh cluster: the CLI orchestrator seeds every region's Redis (seedSnapshot).
  for (const node of nodes) {
    const raw = encodeSnapshot(snapshotOf(seedState(node.id, ids, seedPolicies), 1, 0));
    node.redis.seedPolicy(raw);
    node.limiterRead = { raw, sentUs: 0 };
    node.view = viewOfSnapshot(node.index, raw).view;
  }
  const anyClients = nodes.some((x) => x.clients.length > 0);
  if (anyClients && opts.algorithm !== "token_bucket") {
    throw new RangeError(`leased clients need the token bucket, not ${opts.algorithm}`);
  }
  const localNow = (node: Node): number => clock.nowUs() + EPOCH_US + node.offsetUs;
  const realOf = (node: Node, localUs: number): number => localUs - EPOCH_US - node.offsetUs;

  // ---- oracles (a policy change adds the old/new ones)
  let boundCapacity = opts.capacity;
  let boundRate = opts.refillPerSecond;
  let change:
    | {
        readonly newSpec: PolicySpec;
        readonly finalProposal: string;
        readonly oracleOld: WindowOracle;
        readonly oracleNew: WindowOracle;
        /** Admissions before this instant feed the old oracle. */
        firstShrinkUs: number;
        /** Admissions from this instant on feed the new oracle. */
        newFromUs: number;
      }
    | undefined;
  let oracle = new WindowOracle(opts.capacity, opts.refillPerSecond);
  // Window algorithms: per window index of the admitting region's Redis clock, Σ cost ≤ C
  // (exact integers; the rollout keeps C, so one bound holds before, across and after it).
  const perWindow = new Map<number, number>();
  let admittedWindowAlg = 0;
  const admitWindow = (node: Node, cost: number): void => {
    admittedWindowAlg += cost;
    const k = Math.floor(localNow(node) / ((windowMs ?? 1000) * 1000));
    const sum = (perWindow.get(k) ?? 0) + cost;
    perWindow.set(k, sum);
    const excess = sum - opts.capacity;
    if (excess > worstPerWindowExcess) worstPerWindowExcess = excess;
    if (excess > 0) fail(`window ${k} (${opts.algorithm}): ${sum} admitted > C = ${opts.capacity}`);
  };
  let worstPerWindowExcess = Number.NEGATIVE_INFINITY;
  const admit = (cost: number, node: Node): void => {
    if (windowAlg) {
      admitWindow(node, cost);
      return;
    }
    const now = clock.nowUs();
    oracle.admit(now, cost);
    if (oracle.violation !== undefined) fail(oracle.violation);
    if (change !== undefined) {
      if (now < change.firstShrinkUs) {
        change.oracleOld.admit(now, cost);
        if (change.oracleOld.violation !== undefined) fail(`old policy: ${change.oracleOld.violation}`);
      }
      if (now >= change.newFromUs) {
        change.oracleNew.admit(now, cost);
        if (change.oracleNew.violation !== undefined) fail(`new policy: ${change.oracleNew.violation}`);
      }
    }
    if (now >= measureFromUs && now < opts.durationUs) admittedInWindow += cost;
  };

  // Breakpoints of a region's share become (no-op) events, so the per-event
  // check also runs at every instant a share changes without a script.
  const scheduleBreakpoints = (node: Node): void => {
    for (const bp of node.redis.breakpoints(node.view.limit, localNow(node))) {
      const real = realOf(node, bp);
      if (pending.has(real)) continue;
      pending.add(real);
      clock.at(real, () => pending.delete(real));
    }
  };

  /** Each region's share as checkShares last read it (checkLeases runs right after, at the same instant). */
  const sharesNow: number[] = nodes.map(() => 0);
  const checkShares = (): void => {
    let sum = 0;
    for (const node of nodes) {
      const s = node.redis.shareAt(node.view.limit, localNow(node));
      sharesNow[node.index] = s;
      sum += s;
    }
    if (sum - U > worstShareExcess) worstShareExcess = sum - U;
    if (sum > U) {
      const parts = nodes.map((x) => `${x.id}=${x.redis.shareAt(x.view.limit, localNow(x))}`).join(" ");
      fail(`Σ shares ${sum} > U (${parts})`);
    }
  };

  /**
   * Leased tokens a region's clients can still spend or Redis still counts:
   * Redis's unexpired leases, plus what clients hold of leases Redis no longer
   * records (a wipe or a failover forgot them; the clients spend them anyway).
   */
  const leasedOf = (
    node: Node,
    recorded: ReadonlyMap<string, { tokens: number; expiryUs: number }>,
  ): number => {
    const local = localNow(node);
    let sum = 0;
    for (const l of recorded.values()) if (local < l.expiryUs) sum += l.tokens;
    const now = clock.nowUs();
    for (const c of node.clients) {
      const l = c.lease;
      if (l === undefined || now >= l.stopAtUs) continue;
      const r = recorded.get(l.id);
      if (r === undefined || local >= r.expiryUs) sum += l.tokens - l.used;
    }
    return sum;
  };

  const checkLeases = (): void => {
    let capScaled = 0;
    let overScaled = 0;
    let bound = boundCapacity;
    for (const node of nodes) {
      const limit = node.view.limit;
      if (limit.capacity > bound) bound = limit.capacity;
      const s = sharesNow[node.index] ?? 0;
      capScaled += limit.capacity * s;
      const leased = leasedOf(node, node.redis.key.leases);
      const tokens = node.redis.bucketTokensAt(limit, localNow(node)) ?? 0;
      // Exact in the model's own arithmetic: the bucket is clamped to capacityOf(C, s, leased).
      const ok =
        tokens >= 0
          ? tokens <= capacityOf(limit.capacity, s, leased)
          : 0 <= capacityOf(limit.capacity, s, leased);
      if (!ok) overScaled += U * (leased + Math.max(0, tokens)) - limit.capacity * s;
    }
    if (overScaled > 0 && capScaled + overScaled > bound * U) {
      const parts = nodes
        .map((x) => {
          const b = x.redis.tokensAt(x.view.limit, localNow(x));
          return `${x.id}: s=${x.redis.shareAt(x.view.limit, localNow(x))} leased=${leasedOf(x, x.redis.key.leases)} bucket=${b?.tokens ?? "-"}`;
        })
        .join("; ");
      fail(
        `leased + bucket exceeds the capacity of the shares: Σ = ${(capScaled + overScaled) / U} > C = ${bound} (${parts})`,
      );
    }
  };

  // ---- Redis settings checked continuously (DESIGN §4; replication.ts createPrimaryWatcher)
  const unsafeSettings = (node: Node): Set<SetupSetting> => {
    const out = new Set<SetupSetting>();
    if (node.redis.evicting && opts.bugs.evictionUnnoticed !== true) out.add("maxmemory-policy");
    if (node.redis.connectedReplicas() > 1 && opts.bugs.lateReplicaUncovered !== true) out.add("replicas");
    return out;
  };
  /** Memory pressure: while the policy stays evicting on this server, the key is evicted every 50–400 ms. */
  const evictWhileEvicting = (node: Node, server: number): void => {
    if (!node.redis.evicting || node.server !== server) return;
    node.redis.evict();
    stats.evictions++;
    scheduleBreakpoints(node);
    clock.schedule(driftRng.int(50_000, 400_000), () => evictWhileEvicting(node, server));
  };
  /**
   * A failover: another server is the primary. The operator's evicting
   * setting is assumed on it too (the worst case), but its memory pressure
   * starts afresh at the first watcher tick, which also sees its replid.
   */
  const promoted = (node: Node): void => {
    node.server++;
    node.pressure = false;
  };
  /**
   * One watcher tick of one process (its own `drift`), at the region's Redis
   * time `localUs`: an evicting policy seen or gone rotates the marker
   * (recovery: what was evicted is forgotten state); `drift` is what the
   * process fails closed on. Memory pressure (evictions) starts at the first
   * tick after the switch, noticed or not (FaultOptions.evictions).
   */
  const watchSetup = (node: Node, drift: Set<SetupSetting>, localUs: number): void => {
    const now = unsafeSettings(node);
    for (const setting of SETUP_SETTINGS) {
      if (drift.has(setting) === now.has(setting)) continue;
      if (setting === "maxmemory-policy") node.redis.rotate(localUs);
      if (now.has(setting)) drift.add(setting);
      else drift.delete(setting);
    }
    scheduleBreakpoints(node);
    if (node.redis.evicting && !node.pressure) {
      node.pressure = true;
      evictWhileEvicting(node, node.server);
    }
  };

  // ---- the daemons
  const sessionUp = (a: Node, b: Node): boolean =>
    a.daemon !== undefined && b.daemon !== undefined && !net.isCut(a.id, b.id) && !net.isCut(b.id, a.id);
  const sessions = new Map<string, boolean>();
  /** After a change of who can talk to whom: peers whose session came up exchange full state (Mesh onPeerUp). */
  const refreshSessions = (): void => {
    for (const a of nodes) {
      for (const b of nodes) {
        if (a === b) continue;
        const key = `${a.id}>${b.id}`;
        const up = sessionUp(a, b);
        const was = sessions.get(key) ?? false;
        sessions.set(key, up);
        if (up && !was) {
          const life = a.life;
          clock.schedule(daemonRng.int(2_000, 60_000), () => {
            if (a.life !== life || !sessionUp(a, b)) return;
            asyncTouched = true;
            a.daemon?.peerUp(b.id);
          });
        }
      }
    }
  };

  const execFor = (node: Node, life: number) => {
    return <T>(op: (nowUs: number) => T): Promise<T> => {
      // A dead daemon sends nothing more; its awaits never resume.
      if (node.life !== life) return new Promise<T>(() => {});
      return new Promise<T>((resolve, reject) => {
        const at = Math.max(clock.nowUs() + redisRng.int(100, 1_500), node.fifoUs);
        node.fifoUs = at;
        clock.at(at, () => {
          asyncTouched = true;
          try {
            resolve(op(localNow(node)));
          } catch (err) {
            reject(err);
          }
          scheduleBreakpoints(node);
        });
      });
    };
  };

  /** Set at the heal (durationUs): the faults that are draws per event stop then. */
  let faultsHealed = false;
  const waitFor = (node: Node, life: number) => (): Promise<boolean> => {
    if (node.life !== life) return new Promise<boolean>(() => {});
    const stalled = clock.nowUs() < node.stalledUntilUs;
    // DESIGN §4: durable means acknowledged by every replica connected when
    // the WAIT answers; a late replica that lags never acknowledges.
    const lateLags = node.redis.lateReplicaLags() && opts.bugs.lateReplicaUncovered !== true;
    // Random WAIT failures are a fault: they stop at the heal, like stalls (the
    // draw is kept so the streams stay as they were). After the heal a region's
    // rollout state must get out, and it leaves only from a durable snapshot write.
    const unlucky = redisRng.chance(opts.faults.waitFailRate) && !faultsHealed;
    let timeout = stalled || lateLags || unlucky;
    // Its caller's write was just answered: it is on the primary of now.
    const writeReplid = node.redis.replid;
    let startUs = clock.nowUs();
    let startReplid = writeReplid;
    if (opts.faults.failoverBehindAddress === true) {
      // Behind one address a failover is a reconnect: a WAIT in flight at it,
      // queued behind one in flight (durabilityWaiter shares them), or entered
      // while the connection reconnects, runs on the new primary.
      const now = startUs;
      const fo = node.failoversAt.find((t) => t > now && t <= now + 2 * WAIT_TIMEOUT_US);
      if (fo !== undefined) {
        stats.reconnectedWaits++;
        startUs = fo + driftRng.int(1_000, 20_000);
        // The new primary's replica is streaming (a failover ends any stall).
        timeout = unlucky;
        clock.at(startUs, () => {
          startReplid = node.redis.replid;
        });
      }
    }
    const at = Math.max(startUs + (timeout ? WAIT_TIMEOUT_US : redisRng.int(200, 3_000)), node.fifoUs);
    node.fifoUs = at;
    return new Promise<boolean>((resolve) => {
      clock.at(at, () => {
        asyncTouched = true;
        // The certificate (DESIGN §4): the WAIT covers its caller's write only
        // if no failover came between the write and the answer (bug j: only
        // between the WAIT's own start and the answer).
        const certifiedReplid = opts.bugs.certifyAcrossFailover === true ? startReplid : writeReplid;
        if (timeout || node.redis.replid !== certifiedReplid) {
          stats.waitFailures++;
          resolve(false);
          return;
        }
        node.redis.replicate();
        resolve(true);
      });
    });
  };

  const startDaemon = (node: Node): void => {
    node.life++;
    const life = node.life;
    // The daemon process's own watcher state (redis-port.ts drifting()).
    const daemonDrift = new Set<SetupSetting>();
    const drifting = () => daemonDrift.size > 0;
    const store: DaemonStore = createModelDaemonStore({
      region: node.id,
      redis: () => node.redis,
      exec: execFor(node, life),
      waitDurable: waitFor(node, life),
      drifting,
    });
    const timers: DaemonTimers = {
      setTimeout: (fn, ms) =>
        clock.schedule(Math.max(0, Math.round(ms * 1000)), () => {
          if (node.life !== life) return;
          asyncTouched = true;
          fn();
        }),
      clearTimeout: (handle) => clock.cancel(handle as number),
    };
    const dRng = daemonRng.fork();
    const rollout = new RolloutStep(
      {
        region: node.id,
        regions: ids,
        limiterStaleMs: LIMITER_STALE_US / 1000,
        waitUs: opts.bugs.growBeforeAllAcks === true ? 0 : opts.policyRule.growAfterUs,
        windowMarginUs: 2 * opts.epsilonUs,
        seedPolicies: () => seedPolicies,
        parse: parsePolicy,
        now: () => clock.nowUs() / 1000,
      },
      createModelRolloutPort({
        region: node.id,
        redis: () => node.redis,
        exec: execFor(node, life),
        waitDurable: waitFor(node, life),
        drifting,
      }),
    );
    const effective = rolloutPolicyResolver(rollout, {
      region: node.id,
      regions: ids,
      floorPpm: opts.floorPpm,
    });
    const daemon = new GossipDaemon(
      {
        region: node.id,
        peers: ids,
        round: { minMs: opts.roundMinUs / 1000, maxMs: opts.roundMaxUs / 1000 },
        digestEveryRounds: opts.fullSyncEveryRounds,
        digestBuckets: 1,
        reweighting: opts.reweighting,
        ...(opts.clockCheck !== undefined
          ? {
              clockCheck: {
                excludeAboveUs: opts.clockCheck.safeFraction * 2 * opts.epsilonUs,
                resumeAtOrBelowUs: opts.clockCheck.resumeFraction * 2 * opts.epsilonUs,
                maxSampleAgeUs: Math.max(5_000_000, 2 * opts.roundMaxUs),
              },
            }
          : {}),
      },
      {
        store,
        link: {
          send: (peer, bytes) => {
            if (node.life !== life) return false;
            const p = nodes.find((x) => x.id === peer);
            if (p === undefined || !sessionUp(node, p)) return false;
            net.send(node.id, peer, bytes);
            return true;
          },
          isUp: (peer) => {
            const p = nodes.find((x) => x.id === peer);
            return node.life === life && p !== undefined && sessionUp(node, p);
          },
        },
        policies: {
          resolve: (tenant, resource) => {
            if (tenant !== MODEL_TENANT || resource !== MODEL_RESOURCE) {
              throw new Error(`no policy for ${tenant}|${resource}`);
            }
            const mine = effective.resolve(tenant, resource);
            if (opts.bugs.relendBorrowed === true) {
              // Bug (b): lend from the current share (borrowed units too), floor 0.
              const share = node.redis.shareAt(keyLimitOf(mine.policy), localNow(node));
              const regions = mine.regions.map((q) =>
                q.region === node.id ? { ...q, baseShare: share + q.baseShare, floorShare: 0 } : q,
              );
              return { policy: mine.policy, regions };
            }
            return mine;
          },
        },
        rollout,
        random: () => dRng.float(),
        now: () => clock.nowUs() / 1000,
        wallNowMs: () => Math.floor(localNow(node) / 1000),
        timers,
        onClockChange: (c) => {
          if (c.excluded) stats.clockExclusions++;
          else stats.clockResumes++;
        },
        onError: (where, err) => {
          if (node.life !== life) return;
          asyncError ??= `daemon ${node.id} ${where}: ${err instanceof Error ? err.message : String(err)}`;
        },
      },
    );
    node.daemon = daemon;
    // redis-port.ts: the daemon process polls the primary's replication id
    // and re-checks the setup (createPrimaryWatcher).
    const poll = (): void => {
      if (node.life !== life) return;
      void execFor(
        node,
        life,
      )((now) => {
        node.redis.checkPrimary(now);
        watchSetup(node, daemonDrift, now);
      });
      clock.schedule(PRIMARY_CHECK_US, poll);
    };
    clock.schedule(daemonRng.int(1, PRIMARY_CHECK_US), poll);
    daemon.start();
    refreshSessions();
  };

  const killDaemon = (node: Node): void => {
    const d = node.daemon;
    if (d === undefined) return;
    node.life++;
    node.daemon = undefined;
    // Its timer is cancelled; a round in flight never resumes (its commands go nowhere).
    void d.stop();
    refreshSessions();
  };

  for (const node of nodes) {
    net.addNode(node.id, (from, bytes) => {
      const d = node.daemon;
      if (d === undefined) return;
      asyncTouched = true;
      d.onFrame(from, bytes);
    });
  }
  for (const node of nodes) startDaemon(node);

  // ---- durable admissions (DESIGN §4; limiter redis/store.ts mustBeDurable)
  // An admitting check or a lease grant is answered only once the replica has
  // the write: the limiter's probe + WAIT on its own connection. Modelled as
  // a WAIT at the script's instant (no latency; a failover between the script
  // and a slower WAIT would only turn the admission into a refusal): it fails
  // while the region's replica stream is stalled, or with probability
  // waitFailRate; the caller then gets nothing and the tokens stay consumed.
  // Otherwise the replica catches up with every write so far, so a failover
  // can forget only what was never handed out.
  const durable = (node: Node): boolean => {
    if (opts.bugs.undurableAdmissions === true) return true;
    const lateLags = node.redis.lateReplicaLags() && opts.bugs.lateReplicaUncovered !== true;
    if (clock.nowUs() < node.stalledUntilUs || lateLags || durableRng.chance(opts.faults.waitFailRate)) {
      stats.undurable++;
      return false;
    }
    node.redis.replicate();
    return true;
  };

  // ---- the limiters' policy (limiter policy-source: GET gq:policy every limiterStaleMs / 4;
  // a snapshot is used until its read was sent + limiterStaleMs, then checks fail closed)
  const limiterKnows = (node: Node): boolean =>
    node.limiterRead !== undefined && clock.nowUs() < node.limiterRead.sentUs + LIMITER_STALE_US;
  for (const node of nodes) {
    const poll = (): void => {
      const sentUs = clock.nowUs();
      clock.schedule(redisRng.int(100, 1_500), () => {
        const raw = node.redis.policy;
        clock.schedule(redisRng.int(100, 1_500), () => {
          if (raw !== null) {
            node.limiterRead = { raw, sentUs };
            const view = viewOfSnapshot(node.index, raw).view;
            if (view.limit !== node.view.limit) {
              node.view = view;
              scheduleBreakpoints(node);
            }
          }
        });
      });
      clock.schedule(LIMITER_STALE_US / 4, poll);
    };
    clock.schedule(workRng.int(1, LIMITER_STALE_US / 4), poll);
  }

  // ---- in-process leased clients (limiter LeasedClient semantics, model scripts)
  const releaseOf = (c: Client): { leaseId: string; used: number } | undefined => {
    const l = c.lease;
    if (l === undefined || clock.nowUs() >= l.stopAtUs) return undefined;
    return { leaseId: l.id, used: l.used };
  };
  const acquire = (node: Node, c: Client): void => {
    c.acquiring = true;
    const sentUs = clock.nowUs();
    const release = releaseOf(c);
    c.lease = undefined; // stops using the old lease when it sends the renewal
    const id = `${c.name}.${++c.seq}`;
    const tokens = workRng.int(1, opts.clients.batchMax);
    const durationUs = workRng.int(opts.clients.leaseMinUs, opts.clients.leaseMaxUs);
    const known = limiterKnows(node); // the limiter resolves the policy before it calls Redis
    clock.schedule(redisRng.int(100, 2_000), () => {
      if (!known || node.limiterDrift.size > 0) {
        // GQ_ERR_POLICY_UNKNOWN, or setup drift: no lease (the release is not sent either).
        c.acquiring = false;
        return;
      }
      const redisNowUs = localNow(node);
      const r = node.redis.acquireLease(node.view.limit, release, id, tokens, durationUs, redisNowUs);
      const granted = r.granted > 0 && durable(node);
      // limiter LeasedClient: the granted duration (the script caps it at D
      // and before a borrowed loan's deadline − ε), timed from the send.
      const grantedUs = Math.min(durationUs, r.expiryUs - redisNowUs);
      scheduleBreakpoints(node);
      clock.schedule(redisRng.int(100, 2_000), () => {
        c.acquiring = false;
        if (!granted) return;
        stats.leases++;
        c.lease = {
          id,
          tokens: r.granted,
          used: 0,
          stopAtUs:
            (opts.bugs.leaseFromReceipt === true ? clock.nowUs() : sentUs) +
            grantedUs -
            opts.clients.marginUs,
          expiryLocalUs: r.expiryUs,
        };
      });
    });
  };
  const serveLeased = (node: Node, c: Client, cost: number): boolean => {
    const l = c.lease;
    if (l !== undefined && clock.nowUs() < l.stopAtUs && l.tokens - l.used >= cost) {
      l.used += cost;
      return true;
    }
    if (!c.acquiring) acquire(node, c);
    return false;
  };
  const closeEarly = (node: Node, c: Client): void => {
    const release = releaseOf(c);
    c.lease = undefined;
    if (release !== undefined) {
      clock.schedule(redisRng.int(100, 2_000), () => {
        node.redis.releaseLease(node.view.limit, release.leaseId, release.used, localNow(node));
        scheduleBreakpoints(node);
      });
    }
  };

  // ---- workload
  let demandOn = true;
  let admittedInWindow = 0;
  const measureFromUs = opts.demand.kind === "hot" ? Math.min(5_000_000, opts.durationUs / 2) : 0;
  const hotShareTarget = U - (n - 1) * opts.floorPpm;
  let reweightUs: number | undefined;
  let hotIndex = 0;
  const arrival = (node: Node): void => {
    if (!demandOn) return;
    const rate = node.demandPerSec;
    if (rate <= 0) {
      clock.schedule(100_000, () => arrival(node));
      return;
    }
    const cost = opts.maxCost > 1 ? workRng.int(1, opts.maxCost) : 1;
    let allowed: boolean;
    if (node.clients.length > 0 && workRng.chance(opts.clients.leasedFraction)) {
      allowed = serveLeased(node, workRng.pick(node.clients), cost);
    } else if (!limiterKnows(node)) {
      allowed = false; // policy unknown: fails closed
    } else if (node.limiterDrift.size > 0) {
      allowed = false; // setup drift (limiter setup-drift.ts): the degraded deny
    } else {
      allowed = node.redis.check(node.view.limit, cost, localNow(node)) && durable(node);
      scheduleBreakpoints(node);
    }
    if (allowed) admit(cost, node);
    else denied += cost;
    const meanGapUs = 1e6 / rate;
    clock.schedule(Math.max(1, Math.round(workRng.exponential(meanGapUs))), () => arrival(node));
  };
  // A window algorithm's derived refill (C per window) is no demand scale: every region over its
  // slice most of the time needs the scenario's r.
  const rateNow = (): number =>
    windowAlg ? opts.refillPerSecond : (nodes[0]?.view.limit.refillPerSecond ?? opts.refillPerSecond);
  const setPhase = (): void => {
    if (opts.demand.kind === "phases") return;
    if (opts.demand.kind === "hot") {
      nodes.forEach((x, i) => {
        x.demandPerSec =
          i === hotIndex ? opts.refillPerSecond * (opts.demand.kind === "hot" ? opts.demand.ratio : 0) : 0;
      });
      return;
    }
    const r = rateNow();
    if (workRng.chance(0.6)) {
      const hot = workRng.int(0, n - 1);
      nodes.forEach((x, i) => {
        x.demandPerSec = i === hot ? r * workRng.floatIn(1, 2.5) : r * workRng.floatIn(0, 0.2 / n);
      });
    } else {
      for (const x of nodes) x.demandPerSec = r * workRng.floatIn(0, 2.5 / n);
    }
    clock.schedule(workRng.int(1_000_000, 4_000_000), setPhase);
  };
  setPhase();
  if (opts.demand.kind === "phases") {
    for (const ph of opts.demand.phases) {
      clock.at(ph.atUs, () => {
        nodes.forEach((x, i) => {
          x.demandPerSec = opts.refillPerSecond * (ph.rates[i] ?? 0);
        });
      });
    }
  }
  for (const node of nodes) clock.schedule(workRng.int(0, 10_000), () => arrival(node));
  if (opts.demand.kind === "hot" && opts.demand.shiftAtUs !== undefined) {
    const shiftAt = opts.demand.shiftAtUs;
    clock.at(shiftAt, () => {
      hotIndex = 1;
      setPhase();
    });
  }
  if (opts.clients.closeEveryUs > 0) {
    for (const node of nodes) {
      for (const c of node.clients) {
        const next = (): void => {
          if (!demandOn) return;
          closeEarly(node, c);
          clock.schedule(Math.round(workRng.exponential(opts.clients.closeEveryUs)) + 1, next);
        };
        clock.schedule(Math.round(workRng.exponential(opts.clients.closeEveryUs)) + 1, next);
      }
    }
  }

  // ---- faults
  const faultWindowEndUs = Math.max(600_000, opts.durationUs - 1_000_000);
  const faultWindow = (): number => faultRng.int(500_000, faultWindowEndUs);
  if (opts.faults.partitionEveryUs > 0) {
    const partition = (): void => {
      if (!demandOn) return;
      const shuffled = faultRng.shuffle([...ids]);
      const k = faultRng.int(1, n - 1);
      net.partition(shuffled.slice(0, k), shuffled.slice(k), { oneWay: faultRng.chance(0.2) });
      refreshSessions();
      clock.schedule(faultRng.int(500_000, 5_000_000), () => {
        net.heal();
        refreshSessions();
      });
      clock.schedule(Math.round(faultRng.exponential(opts.faults.partitionEveryUs)) + 1, partition);
    };
    clock.schedule(Math.round(faultRng.exponential(opts.faults.partitionEveryUs)) + 1, partition);
  }
  for (const iso of opts.faults.isolations ?? []) {
    const id = ids[iso.isolate];
    if (id === undefined) continue;
    clock.at(iso.atUs, () => {
      net.isolate(id);
      refreshSessions();
    });
    clock.at(iso.untilUs, () => {
      net.heal();
      refreshSessions();
    });
  }
  for (const down of opts.faults.daemonDowns ?? []) {
    const node = nodes[down.region];
    if (node === undefined) continue;
    clock.at(down.atUs, () => killDaemon(node));
    clock.at(down.untilUs, () => {
      if (node.daemon === undefined) startDaemon(node);
    });
  }
  for (const step of opts.faults.clockSteps ?? []) {
    const node = nodes[step.region];
    if (node === undefined) throw new RangeError(`clock step: no region ${step.region}`);
    if (!(step.stepUs > 0)) throw new RangeError("clock step: stepUs must be > 0 (forward steps only)");
    clock.at(step.atUs, () => {
      node.offsetUs += step.stepUs;
      scheduleBreakpoints(node);
    });
  }
  const wipes = (opts.faults.wipes ?? []).map((w) => ({ node: nodes[w.region], atUs: w.atUs }));
  for (let i = 0; i < opts.faults.stateLosses; i++)
    wipes.push({ node: faultRng.pick(nodes), atUs: faultWindow() });
  for (const { node, atUs } of wipes) {
    if (node === undefined) continue;
    clock.at(atUs, () => {
      // The daemon keeps running (FLUSHALL, or a Redis restarted without
      // persistence): it re-merges its map into the wiped Redis.
      node.redis.wipe(localNow(node));
      scheduleBreakpoints(node);
    });
  }
  for (let i = 0; i < opts.faults.daemonRestarts; i++) {
    const node = faultRng.pick(nodes);
    const at = faultWindow();
    const downUs = faultRng.int(0, 1_000_000);
    clock.at(at, () => {
      killDaemon(node);
      clock.schedule(downUs, () => {
        if (node.daemon === undefined) startDaemon(node);
      });
    });
  }
  // The replication stream: the replica catches up every 1–200 ms unless stalled.
  for (const node of nodes) {
    const stream = (): void => {
      if (clock.nowUs() >= node.stalledUntilUs) node.redis.replicate();
      clock.schedule(redisRng.int(1_000, REPLICA_STREAM_MAX_US), stream);
    };
    clock.schedule(redisRng.int(1_000, REPLICA_STREAM_MAX_US), stream);
  }
  const stalls: { node: Node; endUs: number; startUs: number }[] = [];
  for (let i = 0; i < opts.faults.replicaStalls; i++) {
    const node = faultRng.pick(nodes);
    const at = faultWindow();
    const len = faultRng.int(100_000, 2_000_000);
    stalls.push({ node, endUs: at + len, startUs: at });
    clock.at(at, () => {
      node.stalledUntilUs = Math.max(node.stalledUntilUs, clock.nowUs() + len);
    });
  }
  for (let i = 0; i < opts.faults.failovers; i++) {
    // Half of the failovers end a replica stall: the writes of the stall are
    // lost (durable admissions make sure none of them was handed out). Only
    // stalls that end inside the fault window: a failover after the heal
    // (with its daemon down for up to 2 s) would leave the quiet phase no
    // time to converge.
    const endable = stalls.filter((x) => x.endUs <= faultWindowEndUs);
    const stall = endable.length > 0 && faultRng.chance(0.5) ? faultRng.pick(endable) : undefined;
    const node = stall?.node ?? faultRng.pick(nodes);
    const at = stall?.endUs ?? faultWindow();
    const downBeforeUs =
      opts.faults.daemonDownAtFailoverUs > 0 ? faultRng.int(0, opts.faults.daemonDownAtFailoverUs) : -1;
    const downAfterUs =
      opts.faults.daemonDownAtFailoverUs > 0 ? faultRng.int(0, opts.faults.daemonDownAtFailoverUs) : 0;
    node.failoversAt.push(at);
    if (downBeforeUs >= 0) clock.at(Math.max(0, at - downBeforeUs), () => killDaemon(node));
    // Longer than any stall (2 s) plus a stream interval (200 ms): the replica
    // holds exactly what it had received when the primary died.
    clock.at(Math.max(0, at - REPLICA_ARM_US), () => {
      node.redis.armReplica();
    });
    clock.at(at, () => {
      node.redis.disarmReplica();
      stats.failovers++;
      stats.lostWrites += node.redis.failover();
      promoted(node);
      node.stalledUntilUs = 0;
      scheduleBreakpoints(node);
      if (downBeforeUs >= 0) {
        clock.schedule(downAfterUs, () => {
          if (node.daemon === undefined) startDaemon(node);
        });
      }
    });
  }

  // ---- issue 21: a replica attached late that lags, then promoted; eviction switched on for a while
  for (let i = 0; i < (opts.faults.lateReplicas ?? 0); i++) {
    const node = driftRng.pick(nodes);
    const at = driftRng.int(500_000, Math.max(600_000, faultWindowEndUs - 2_500_000));
    const promoteAt = at + driftRng.int(300_000, 2_500_000);
    node.failoversAt.push(promoteAt);
    clock.at(at, () => {
      stats.lateReplicas++;
      node.redis.attachLateReplica();
    });
    // The regular replica's copy is kept from then on (ModelRedis.armReplica):
    // another failover in between may promote it.
    clock.at(Math.max(0, promoteAt - REPLICA_ARM_US), () => node.redis.armReplica());
    clock.at(promoteAt, () => {
      node.redis.disarmReplica();
      stats.failovers++;
      stats.lostWrites += node.redis.failover();
      promoted(node);
      node.stalledUntilUs = 0;
      scheduleBreakpoints(node);
    });
  }
  for (let i = 0; i < (opts.faults.evictions ?? 0); i++) {
    const node = driftRng.pick(nodes);
    const at = driftRng.int(500_000, faultWindowEndUs);
    const len = driftRng.int(300_000, 2_000_000);
    clock.at(at, () => {
      node.evictionWindows++;
      node.redis.evicting = true;
    });
    clock.at(at + len, () => {
      node.evictionWindows--;
      node.redis.evicting = node.evictionWindows > 0;
      if (!node.redis.evicting) node.pressure = false;
    });
  }
  // The limiter process's own primary watcher (main.ts): only in runs with these faults (the
  // daemon's watcher alone covers the replid otherwise, as the seed mix was built with).
  if ((opts.faults.lateReplicas ?? 0) > 0 || (opts.faults.evictions ?? 0) > 0) {
    for (const node of nodes) {
      const tick = (): void => {
        // main.ts: the limiter's watcher checks the replid first, then the setup.
        node.redis.checkPrimary(localNow(node));
        watchSetup(node, node.limiterDrift, localNow(node));
        clock.schedule(PRIMARY_CHECK_US, tick);
      };
      clock.schedule(driftRng.int(1, PRIMARY_CHECK_US), tick);
    }
  }

  // ---- policy changes (issue 15): each a proposal pushed into a random region's Redis at a
  // random time; the daemons roll it out (shrink at once, grow after every ack + D + 2ε).
  const specs: PolicySpec[] = [oldSpec];
  for (let k = 0; k < opts.faults.policyChanges; k++) {
    const newRate = policyRng.pick([
      opts.refillPerSecond,
      Math.max(2, Math.floor(opts.refillPerSecond / 2)),
      opts.refillPerSecond * 2,
    ]);
    const bases = basesFor(n, policyRng, opts.floorPpm);
    // A window algorithm's changes move the weights only (C stays the per-window bound).
    specs.push(
      windowAlg
        ? { capacity: opts.capacity, refillPerSecond: opts.refillPerSecond, bases }
        : {
            capacity: policyRng.int(Math.max(2, Math.floor(newRate / 10)), newRate),
            refillPerSecond: newRate,
            bases,
          },
    );
  }
  if (specs.length > 1) {
    const newSpec = specs[specs.length - 1] as PolicySpec;
    boundCapacity = Math.max(...specs.map((x) => x.capacity));
    boundRate = Math.max(...specs.map((x) => x.refillPerSecond));
    oracle = new WindowOracle(boundCapacity, boundRate);
    let at = faultRng.int(1_000_000, Math.max(1_500_000, Math.floor(opts.durationUs / 2)));
    const first = at;
    specs.slice(1).forEach((spec, k) => {
      const node = policyRng.pick(nodes);
      const proposal = {
        proposalId: `sim-${k + 1}`,
        policies: policiesFileOf(spec, ids, opts.algorithm, opts.floorPpm, windowMs),
        at: Math.floor(at / 1000),
      };
      // The admin API: RPUSH gq:policy:proposals (lost if that Redis is wiped before the
      // daemon pops it). Only while demand runs: after the heal every region must know it.
      if (at <= opts.durationUs) clock.at(at, () => node.redis.proposals.push(JSON.stringify(proposal)));
      // The next one while this one may still be rolling out (or right after it completed).
      at += policyRng.int(200_000, 6_000_000);
    });
    change = {
      newSpec,
      finalProposal: `sim-${specs.length - 1}`,
      oracleOld: new WindowOracle(oldSpec.capacity, oldSpec.refillPerSecond),
      oracleNew: new WindowOracle(newSpec.capacity, newSpec.refillPerSecond),
      // Before the first proposal exists nobody can enforce anything but the seed.
      firstShrinkUs: first,
      // Set once every region completed the last version (observed from their snapshots).
      newFromUs: Number.POSITIVE_INFINITY,
    };
  }
  /** Every region's snapshot has the last proposal completed: from then + D + ε (leases, loans), the new bound. */
  const observeCompletion = (): void => {
    if (change === undefined || change.newFromUs !== Number.POSITIVE_INFINITY) return;
    for (const node of nodes) {
      const raw = node.redis.policy;
      if (raw === null || viewOfSnapshot(node.index, raw).completedProposal !== change.finalProposal) return;
    }
    change.newFromUs = clock.nowUs() + opts.loanDurationUs + opts.epsilonUs;
    completedAllUs = clock.nowUs();
  };
  let completedAllUs: number | undefined;

  clock.at(opts.durationUs, () => {
    demandOn = false;
    faultsHealed = true;
    net.heal();
    net.setDefaultLink({ dropRate: 0, duplicateRate: 0 });
    for (const node of nodes) {
      node.stalledUntilUs = 0;
      if (node.daemon === undefined) startDaemon(node);
    }
    refreshSessions();
  });

  // ---- run, checking after every event
  const endUs = opts.durationUs + opts.quiesceUs;
  const drain = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));
  try {
    checkShares();
    while (clock.nowUs() <= endUs && clock.step()) {
      if (asyncTouched) {
        asyncTouched = false;
        await drain();
      }
      if (asyncError !== undefined) fail(asyncError);
      checkShares();
      if (anyClients) checkLeases();
      observeCompletion();
      if (reweightUs === undefined && opts.demand.kind === "hot" && opts.demand.shiftAtUs !== undefined) {
        const shiftAt = opts.demand.shiftAtUs;
        const node = nodes[1];
        if (
          node !== undefined &&
          clock.nowUs() >= shiftAt &&
          node.redis.shareAt(node.view.limit, localNow(node)) >= 0.95 * hotShareTarget
        ) {
          reweightUs = clock.nowUs() - shiftAt;
        }
      }
    }
    const first = nodes[0];
    if (first !== undefined) {
      for (const node of nodes.slice(1)) {
        if (!sameCounters(first.redis.key.counters, node.redis.key.counters)) {
          const policy = nodes.map((x) => `${x.id}=${x.daemon?.status().policy?.phase ?? "down"}`).join(" ");
          fail(`counters of ${first.id} and ${node.id} did not converge after heal (policy: ${policy})`);
        }
      }
      // Every region knows the same newest policy version after the heal.
      const targetOf = (x: Node): string => {
        const d = x.redis.policy === null ? undefined : decodeSnapshot(x.redis.policy);
        return d?.ok === true ? idKey(d.value.target) : "no snapshot";
      };
      for (const node of nodes.slice(1)) {
        if (targetOf(node) !== targetOf(first)) {
          fail(
            `policy targets of ${first.id} (${targetOf(first)}) and ${node.id} (${targetOf(node)}) differ after heal`,
          );
        }
      }
    }
  } catch (e) {
    if (!(e instanceof CheckFailed)) throw e;
  } finally {
    for (const node of nodes) killDaemon(node);
  }
  const measuredUs = opts.durationUs - measureFromUs;
  return {
    seed: opts.seed,
    ok: failure === undefined,
    failure,
    admitted: windowAlg ? admittedWindowAlg : oracle.admitted,
    denied,
    worstShareExcess,
    worstWindowExcess: windowAlg ? worstPerWindowExcess : oracle.worstExcessScaled / 1e6,
    utilization: measuredUs > 0 ? (admittedInWindow * 1e6) / (opts.refillPerSecond * measuredUs) : 0,
    reweightUs,
    loansGranted: nodes.reduce((a, x) => a + x.redis.grants, 0),
    returns: nodes.reduce((a, x) => a + x.redis.returns, 0),
    leases: stats.leases,
    failovers: stats.failovers,
    lostWrites: stats.lostWrites,
    waitFailures: stats.waitFailures,
    undurableAdmissions: stats.undurable,
    lateReplicas: stats.lateReplicas,
    evictions: stats.evictions,
    reconnectedWaits: stats.reconnectedWaits,
    clockExclusions: stats.clockExclusions,
    clockResumes: stats.clockResumes,
    policyCompletedUs: completedAllUs,
    events: clock.executed,
  };
}

function sameCounters(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
