// Policy changes (issue 15): each a proposal pushed into a random region's
// Redis at a random time (the admin API's RPUSH gq:policy:proposals); the
// daemons roll it out (shrink at once, grow after every ack + D + 2ε). The
// G1 checker learns the bounds; the run observes when every region completed
// the last version.
import type { G1Checker } from "./check-g1.js";
import { basesFor, type PolicySpec } from "./policies.js";
import type { World } from "./world.js";

export interface PolicyChanges {
  /** After every event: once every region's snapshot completed the last proposal, the new bound starts D + ε later. */
  observeCompletion(): void;
  /** When every region had completed the last version, if it happened. */
  readonly completedAllUs: number | undefined;
}

export function schedulePolicyChanges(w: World, g1: G1Checker): PolicyChanges {
  const { opts, clock, nodes, policyRng, faultRng } = w;
  const { windowAlg, oldSpec } = w.policies;
  const n = nodes.length;
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
    let at = faultRng.int(1_000_000, Math.max(1_500_000, Math.floor(opts.durationUs / 2)));
    const first = at;
    specs.slice(1).forEach((spec, k) => {
      const node = policyRng.pick(nodes);
      const proposal = {
        proposalId: `sim-${k + 1}`,
        policies: w.policies.fileOf(spec),
        at: Math.floor(at / 1000),
      };
      // The admin API: RPUSH gq:policy:proposals (lost if that Redis is wiped before the
      // daemon pops it). Only while demand runs: after the heal every region must know it.
      if (at <= opts.durationUs) clock.at(at, () => node.redis.proposals.push(JSON.stringify(proposal)));
      // The next one while this one may still be rolling out (or right after it completed).
      at += policyRng.int(200_000, 6_000_000);
    });
    g1.expectChange(specs, { newSpec, finalProposal: `sim-${specs.length - 1}`, firstShrinkUs: first });
  }

  let completedAllUs: number | undefined;
  return {
    observeCompletion() {
      if (!g1.awaitingNewBound) return;
      for (const node of nodes) {
        const raw = node.redis.policy;
        if (raw === null || w.policies.viewOfSnapshot(node.index, raw).completedProposal !== g1.finalProposal)
          return;
      }
      g1.newBoundFrom(clock.nowUs() + opts.loanDurationUs + opts.epsilonUs);
      completedAllUs = clock.nowUs();
    },
    get completedAllUs() {
      return completedAllUs;
    },
  };
}
