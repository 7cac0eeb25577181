// The whole-protocol simulation (VOPR-style): N regions, each the production
// GossipDaemon (round driver, policy, drain/merge/return, frames) over a
// simulated network and clock, with its Redis replaced by the pure model
// behind the same DaemonStore port. Around them: a shifting random workload
// of checks and in-process leased clients, policy changes, and faults
// (drop/dup/reorder/delay, partitions, state losses, daemon restarts, replica
// stalls and WAIT timeouts, failovers that lose writes, daemons down during a
// failover). The checkers run after EVERY event, exactly (no tolerance):
//   - Σ_i s_i(t) ≤ U at the real instant t (check-shares.ts);
//   - leases: Σ_i max(C·s_i, U·(leased_i + max(0, bucket_i))) ≤ C·U (check-leases.ts);
//   - G1 at every admission, across policy changes (check-g1.ts);
//   - at the end, after healing and a quiet phase: counters converged (check-convergence.ts).
// The parts: world.ts (streams, clock, network, regions), policies.ts,
// connections.ts and setup-watch.ts (the model Redis as the processes reach
// it), daemons.ts (the daemon side; its store is store.ts), limiters.ts (the
// limiter side), workload.ts, faults.ts, policy-changes.ts. They are set up in
// a fixed order, which is part of the replay: every random draw comes from
// the seed in the same order, so a seed replays exactly. Integer µs
// everywhere. The daemon is async: after an event that may have resumed it,
// the run drains the microtask queue before the next event.
import { checkConvergence } from "./check-convergence.js";
import { createG1Checker } from "./check-g1.js";
import { checkLeases } from "./check-leases.js";
import { createSharesChecker } from "./check-shares.js";
import { createConnections } from "./connections.js";
import { createDaemons } from "./daemons.js";
import { scheduleFaults, scheduleHeal } from "./faults.js";
import { createLimiters } from "./limiters.js";
import { createPolicies } from "./policies.js";
import { schedulePolicyChanges } from "./policy-changes.js";
import { createSetupWatch } from "./setup-watch.js";
import type { ModelOptions, ModelResult } from "./types.js";
import { createWorkload } from "./workload.js";
import { CheckFailed, createWorld } from "./world.js";

export async function runModel(opts: ModelOptions): Promise<ModelResult> {
  const w = createWorld(opts, (ids) => createPolicies(opts, ids));
  const { clock, nodes, stats } = w;
  const anyClients = nodes.some((x) => x.clients.length > 0);
  if (anyClients && opts.algorithm !== "token_bucket") {
    throw new RangeError(`leased clients need the token bucket, not ${opts.algorithm}`);
  }
  const g1 = createG1Checker(w);
  const shares = createSharesChecker(w);
  const conn = createConnections(w);
  const watch = createSetupWatch(w);
  const daemons = createDaemons(w, conn, watch);
  daemons.attachNetwork();
  for (const node of nodes) daemons.startDaemon(node);
  const limiters = createLimiters(w, conn);
  limiters.startPolicyPolls();
  const workload = createWorkload(w, limiters, g1);
  workload.start();
  scheduleFaults(w, daemons, conn, watch);
  const changes = schedulePolicyChanges(w, g1);
  scheduleHeal(w, daemons);

  // ---- run, checking after every event
  const endUs = opts.durationUs + opts.quiesceUs;
  const drain = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));
  try {
    shares.check();
    while (clock.nowUs() <= endUs && clock.step()) {
      if (w.asyncTouched) {
        w.asyncTouched = false;
        await drain();
      }
      if (w.asyncError !== undefined) w.fail(w.asyncError);
      const s = shares.check();
      if (anyClients) checkLeases(w, s, g1.boundCapacity);
      changes.observeCompletion();
      workload.observe();
    }
    checkConvergence(w);
  } catch (e) {
    if (!(e instanceof CheckFailed)) throw e;
  } finally {
    for (const node of nodes) daemons.killDaemon(node);
  }
  const measuredUs = opts.durationUs - g1.measureFromUs;
  return {
    seed: opts.seed,
    ok: w.failure === undefined,
    failure: w.failure,
    admitted: g1.admitted,
    denied: workload.denied,
    worstShareExcess: shares.worstShareExcess,
    worstWindowExcess: g1.worstWindowExcess,
    utilization: measuredUs > 0 ? (g1.admittedInWindow * 1e6) / (opts.refillPerSecond * measuredUs) : 0,
    reweightUs: workload.reweightUs,
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
    policyCompletedUs: changes.completedAllUs,
    events: clock.executed,
  };
}
