// The regions' connections to their model Redis: the daemon's (each command a
// script run atomically at the region's Redis TIME after a simulated round
// trip, FIFO per connection; WAIT for the replica, with the durability
// certificate of DESIGN §4), the limiter's durable admissions, and the
// asynchronous replication stream.
import { type Node, REPLICA_STREAM_MAX_US, WAIT_TIMEOUT_US, type World } from "./world.js";

export interface Connections {
  /** The daemon's connection of life `life`: `op` runs as one script; a dead life's commands go nowhere. */
  execFor(node: Node, life: number): <T>(op: (nowUs: number) => T) => Promise<T>;
  /** The daemon's WAIT after its last write: whether it is durable. */
  waitFor(node: Node, life: number): () => Promise<boolean>;
  /**
   * Durable admissions (DESIGN §4; @geoquota/redis store.ts durableGate): an
   * admitting check or a lease grant is answered only once the replica has
   * the write.
   */
  durable(node: Node): boolean;
  /** The replication stream: the replica catches up every 1–200 ms unless stalled. */
  startReplication(): void;
}

export function createConnections(w: World): Connections {
  const { opts, clock, redisRng, stats } = w;
  const execFor = (node: Node, life: number) => {
    return <T>(op: (nowUs: number) => T): Promise<T> => {
      // A dead daemon sends nothing more; its awaits never resume.
      if (node.life !== life) return new Promise<T>(() => {});
      return new Promise<T>((resolve, reject) => {
        const at = Math.max(clock.nowUs() + redisRng.int(100, 1_500), node.fifoUs);
        node.fifoUs = at;
        clock.at(at, () => {
          w.asyncTouched = true;
          try {
            resolve(op(w.localNow(node)));
          } catch (err) {
            reject(err);
          }
          w.scheduleBreakpoints(node);
        });
      });
    };
  };

  const waitFor = (node: Node, life: number) => (): Promise<boolean> => {
    if (node.life !== life) return new Promise<boolean>(() => {});
    const stalled = clock.nowUs() < node.stalledUntilUs;
    // DESIGN §4: durable means acknowledged by every replica connected when
    // the WAIT answers; a late replica that lags never acknowledges.
    const lateLags = node.redis.lateReplicaLags() && opts.bugs.lateReplicaUncovered !== true;
    // Random WAIT failures are a fault: they stop at the heal, like stalls (the
    // draw is kept so the streams stay as they were). After the heal a region's
    // rollout state must get out, and it leaves only from a durable snapshot write.
    const unlucky = redisRng.chance(opts.faults.waitFailRate) && !w.faultsHealed;
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
        startUs = fo + w.driftRng.int(1_000, 20_000);
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
        w.asyncTouched = true;
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

  // Modelled as a WAIT at the script's instant (no latency; a failover
  // between the script and a slower WAIT would only turn the admission into a
  // refusal): it fails while the region's replica stream is stalled, or with
  // probability waitFailRate; the caller then gets nothing and the tokens stay
  // consumed. Otherwise the replica catches up with every write so far, so a
  // failover can forget only what was never handed out.
  const durable = (node: Node): boolean => {
    if (opts.bugs.undurableAdmissions === true) return true;
    const lateLags = node.redis.lateReplicaLags() && opts.bugs.lateReplicaUncovered !== true;
    if (clock.nowUs() < node.stalledUntilUs || lateLags || w.durableRng.chance(opts.faults.waitFailRate)) {
      stats.undurable++;
      return false;
    }
    node.redis.replicate();
    return true;
  };

  const startReplication = (): void => {
    for (const node of w.nodes) {
      const stream = (): void => {
        if (clock.nowUs() >= node.stalledUntilUs) node.redis.replicate();
        clock.schedule(redisRng.int(1_000, REPLICA_STREAM_MAX_US), stream);
      };
      clock.schedule(redisRng.int(1_000, REPLICA_STREAM_MAX_US), stream);
    }
  };

  return { execFor, waitFor, durable, startReplication };
}
