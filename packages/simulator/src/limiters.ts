// The limiter side of each region, over its model Redis: the policy source
// (GET gq:policy every limiterStaleMs / 4; a snapshot is used until its read
// was sent + limiterStaleMs, then checks fail closed), a check (its script,
// answered only when durable; denied on setup drift), and the in-process
// leased clients (limiter LeasedClient semantics over the model's scripts).
import type { Connections } from "./connections.js";
import { type Client, LIMITER_STALE_US, type Node, type World } from "./world.js";

export interface Limiters {
  /** Starts every region's policy poll. */
  startPolicyPolls(): void;
  /** A check of `cost` by the region's limiter: whether it was admitted. */
  check(node: Node, cost: number): boolean;
  /** A leased client spends `cost` from its lease, or asks for one (and refuses this time). */
  serveLeased(node: Node, c: Client, cost: number): boolean;
  /** The client closes its lease early, releasing what it did not use. */
  closeEarly(node: Node, c: Client): void;
}

export function createLimiters(w: World, conn: Connections): Limiters {
  const { opts, clock, workRng, redisRng, stats } = w;
  const limiterKnows = (node: Node): boolean =>
    node.limiterRead !== undefined && clock.nowUs() < node.limiterRead.sentUs + LIMITER_STALE_US;

  const startPolicyPolls = (): void => {
    for (const node of w.nodes) {
      const poll = (): void => {
        const sentUs = clock.nowUs();
        clock.schedule(redisRng.int(100, 1_500), () => {
          const raw = node.redis.policy;
          clock.schedule(redisRng.int(100, 1_500), () => {
            if (raw !== null) {
              node.limiterRead = { raw, sentUs };
              const view = w.policies.viewOfSnapshot(node.index, raw).view;
              if (view.limit !== node.view.limit) {
                node.view = view;
                w.scheduleBreakpoints(node);
              }
            }
          });
        });
        clock.schedule(LIMITER_STALE_US / 4, poll);
      };
      clock.schedule(workRng.int(1, LIMITER_STALE_US / 4), poll);
    }
  };

  const check = (node: Node, cost: number): boolean => {
    if (!limiterKnows(node)) return false; // policy unknown: fails closed
    if (node.limiterDrift.size > 0) return false; // setup drift (limiter setup-drift.ts): the degraded deny
    const allowed = node.redis.check(node.view.limit, cost, w.localNow(node)) && conn.durable(node);
    w.scheduleBreakpoints(node);
    return allowed;
  };

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
      const redisNowUs = w.localNow(node);
      const r = node.redis.acquireLease(node.view.limit, release, id, tokens, durationUs, redisNowUs);
      const granted = r.granted > 0 && conn.durable(node);
      // limiter LeasedClient: the granted duration (the script caps it at D
      // and before a borrowed loan's deadline − ε), timed from the send.
      const grantedUs = Math.min(durationUs, r.expiryUs - redisNowUs);
      w.scheduleBreakpoints(node);
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
        node.redis.releaseLease(node.view.limit, release.leaseId, release.used, w.localNow(node));
        w.scheduleBreakpoints(node);
      });
    }
  };

  return { startPolicyPolls, check, serveLeased, closeEarly };
}
