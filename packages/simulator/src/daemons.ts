// The daemons: one production GossipDaemon per region (with its RolloutStep),
// its store the model Redis (store.ts) over the region's connection, its
// frames over the simulated network, its timers on the simulated clock, and
// its process's primary watcher; started, killed and restarted by the faults.
import {
  type DaemonStore,
  type DaemonTimers,
  GossipDaemon,
  RolloutStep,
  rolloutPolicyResolver,
} from "@geoquota/gossip";
import type { Connections } from "./connections.js";
import type { SetupWatch } from "./setup-watch.js";
import {
  createModelDaemonStore,
  createModelRolloutPort,
  keyLimitOf,
  MODEL_RESOURCE,
  MODEL_TENANT,
} from "./store.js";
import { LIMITER_STALE_US, type Node, PRIMARY_CHECK_US, type SetupSetting, type World } from "./world.js";

export interface Daemons {
  startDaemon(node: Node): void;
  killDaemon(node: Node): void;
  /** After a change of who can talk to whom: peers whose session came up exchange full state (Mesh onPeerUp). */
  refreshSessions(): void;
  /** Delivers every region's frames to its daemon (call once, before the first start). */
  attachNetwork(): void;
}

export function createDaemons(w: World, conn: Connections, watch: SetupWatch): Daemons {
  const { opts, clock, net, nodes, ids, daemonRng, stats } = w;
  const { execFor, waitFor } = conn;
  const sessionUp = (a: Node, b: Node): boolean =>
    a.daemon !== undefined && b.daemon !== undefined && !net.isCut(a.id, b.id) && !net.isCut(b.id, a.id);
  const sessions = new Map<string, boolean>();
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
            w.asyncTouched = true;
            a.daemon?.peerUp(b.id);
          });
        }
      }
    }
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
          w.asyncTouched = true;
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
        seedPolicies: () => w.policies.seedPolicies,
        parse: w.policies.parsePolicy,
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
              const share = node.redis.shareAt(keyLimitOf(mine.policy), w.localNow(node));
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
        wallNowMs: () => Math.floor(w.localNow(node) / 1000),
        timers,
        onClockChange: (c) => {
          if (c.excluded) stats.clockExclusions++;
          else stats.clockResumes++;
        },
        onError: (where, err) => {
          if (node.life !== life) return;
          w.asyncError ??= `daemon ${node.id} ${where}: ${err instanceof Error ? err.message : String(err)}`;
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
        watch.watchSetup(node, daemonDrift, now);
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

  const attachNetwork = (): void => {
    for (const node of nodes) {
      net.addNode(node.id, (from, bytes) => {
        const d = node.daemon;
        if (d === undefined) return;
        w.asyncTouched = true;
        d.onFrame(from, bytes);
      });
    }
  };

  return { startDaemon, killDaemon, refreshSessions, attachNetwork };
}
