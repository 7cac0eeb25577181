// The faults of a run, all drawn from the seed when the run starts: network
// partitions and isolations, daemons down, clock steps, state losses, daemon
// restarts, replica stalls, failovers that lose writes (with the daemon down
// around them), and issue 21's late replicas and eviction switched on for a
// while; and the heal at durationUs, after which the quiet phase converges.
import type { Connections } from "./connections.js";
import type { Daemons } from "./daemons.js";
import type { SetupWatch } from "./setup-watch.js";
import { type Node, PRIMARY_CHECK_US, REPLICA_ARM_US, type World } from "./world.js";

/**
 * Schedules every fault. The replication stream starts among them (its draws
 * sit between the restarts' and the stalls' in the seed's streams).
 */
export function scheduleFaults(w: World, daemons: Daemons, conn: Connections, watch: SetupWatch): void {
  const { opts, clock, net, nodes, ids, faultRng, driftRng, stats } = w;
  const { startDaemon, killDaemon, refreshSessions } = daemons;
  const n = nodes.length;
  const faultWindowEndUs = faultWindowEnd(w);
  const faultWindow = (): number => faultRng.int(500_000, faultWindowEndUs);
  if (opts.faults.partitionEveryUs > 0) {
    const partition = (): void => {
      if (!w.demandOn) return;
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
      w.scheduleBreakpoints(node);
    });
  }
  const wipes = (opts.faults.wipes ?? []).map((x) => ({ node: nodes[x.region], atUs: x.atUs }));
  for (let i = 0; i < opts.faults.stateLosses; i++)
    wipes.push({ node: faultRng.pick(nodes), atUs: faultWindow() });
  for (const { node, atUs } of wipes) {
    if (node === undefined) continue;
    clock.at(atUs, () => {
      // The daemon keeps running (FLUSHALL, or a Redis restarted without
      // persistence): it re-merges its map into the wiped Redis.
      node.redis.wipe(w.localNow(node));
      w.scheduleBreakpoints(node);
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
  conn.startReplication();
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
  /** The failover itself: the replica (as armed) is the primary; the daemon comes back if it was stopped for it. */
  const failoverAt = (node: Node, restart: (() => void) | undefined): void => {
    node.redis.disarmReplica();
    stats.failovers++;
    stats.lostWrites += node.redis.failover();
    watch.promoted(node);
    node.stalledUntilUs = 0;
    w.scheduleBreakpoints(node);
    restart?.();
  };
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
    clock.at(at, () =>
      failoverAt(
        node,
        downBeforeUs >= 0
          ? () =>
              clock.schedule(downAfterUs, () => {
                if (node.daemon === undefined) startDaemon(node);
              })
          : undefined,
      ),
    );
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
    clock.at(promoteAt, () => failoverAt(node, undefined));
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
        node.redis.checkPrimary(w.localNow(node));
        watch.watchSetup(node, node.limiterDrift, w.localNow(node));
        clock.schedule(PRIMARY_CHECK_US, tick);
      };
      clock.schedule(driftRng.int(1, PRIMARY_CHECK_US), tick);
    }
  }
}

/** Faults drawn at random land before this instant (1 s before the heal, at least 0.6 s in). */
export function faultWindowEnd(w: World): number {
  return Math.max(600_000, w.opts.durationUs - 1_000_000);
}

/** The heal at durationUs: demand stops, the network heals, stalls end, every daemon runs. */
export function scheduleHeal(w: World, daemons: Daemons): void {
  const { clock, net, nodes } = w;
  clock.at(w.opts.durationUs, () => {
    w.demandOn = false;
    w.faultsHealed = true;
    net.heal();
    net.setDefaultLink({ dropRate: 0, duplicateRate: 0 });
    for (const node of nodes) {
      node.stalledUntilUs = 0;
      if (node.daemon === undefined) daemons.startDaemon(node);
    }
    daemons.refreshSessions();
  });
}
