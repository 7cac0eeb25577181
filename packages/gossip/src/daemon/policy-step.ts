// The daemon's policy step for one key in a round: run the re-weighting
// policy on the merged counters and this region's loan view, then carry out
// its decision through the store's scripts — early returns first (they free
// this region's use), then grants and renewals to reachable borrowers. Each
// loan or return that the store made durable enters the map (and the
// durability ledger) to be shipped. Also keeps the active set (keys worth a
// policy run every round) and a bounded sample of targets for /v1/status.
import type { KeyPolicy } from "@geoquota/core";
import { KeyRecord, type Replica } from "@geoquota/crdt";
import {
  type CounterReading,
  decideRound,
  initialPolicyMemory,
  type PolicyMemory,
  type PolicyOptions,
  type RegionQuota,
} from "../policy/index.js";
import type { DurableLedger } from "./durable-ledger.js";
import type { FrameLink } from "./frames.js";
import type { DaemonMetrics } from "./metrics.js";
import type { DaemonStore, KeyReading } from "./store-port.js";

interface ActiveKey {
  tenant: string;
  resource: string;
  memory: PolicyMemory;
  lastBusyMs: number;
}

/** A key's policy as the daemon resolved it. */
export interface DaemonKey {
  readonly tenant: string;
  readonly resource: string;
  readonly policy: KeyPolicy;
  readonly regions: readonly RegionQuota[];
}

export interface PolicyStepDeps {
  readonly region: string;
  readonly policy: PolicyOptions;
  readonly idleMs: number;
  readonly store: DaemonStore;
  readonly link: FrameLink;
  readonly replica: Replica;
  readonly durable: DurableLedger;
  readonly metrics: DaemonMetrics | undefined;
  /** Monotonic ms. */
  readonly now: () => number;
  readonly onError: ((where: string, err: unknown) => void) | undefined;
  /** The clock check excludes this peer: no loans to it, its loans to us are returned (DESIGN §1.2). */
  readonly excluded: (peer: string) => boolean;
}

export class PolicyStep {
  private readonly active = new Map<string, ActiveKey>();
  readonly sample = new Map<string, { targets: Record<string, number>; recovering: boolean }>();
  loansGranted = 0;
  loansReturned = 0;

  constructor(private readonly d: PolicyStepDeps) {}

  /** Keys that get a policy run every round, whether or not they changed. */
  activeKeys(): IterableIterator<string> {
    return this.active.keys();
  }

  get activeCount(): number {
    return this.active.size;
  }

  /** A key peers are busy with is worth a policy run here too. */
  activate(key: string, tenant: string, resource: string): void {
    if (this.active.has(key)) return;
    this.active.set(key, { tenant, resource, memory: initialPolicyMemory(), lastBusyMs: this.d.now() });
  }

  /**
   * Runs the policy for `key` (its Redis view `state`, its merged record) and executes the
   * decision. True when the key's targets moved this round by FAST_ROUND_MOVE_PPM or more:
   * shares are on their way somewhere, and the daemon's next round comes sooner (daemon.ts).
   */
  async run(key: string, p: DaemonKey, state: KeyReading, merged: KeyRecord): Promise<boolean> {
    const entry = this.active.get(key) ?? {
      tenant: p.tenant,
      resource: p.resource,
      memory: initialPolicyMemory(),
      lastBusyMs: this.d.now(),
    };
    const counters: CounterReading = {
      admitted: Object.fromEntries(merged.consumed.p),
      denied: Object.fromEntries(merged.denied),
    };
    const decision = decideRound(
      entry.memory,
      {
        self: this.d.region,
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
      this.d.policy,
    );
    const moved = targetsMoved(entry.memory.targets, decision.targets);
    entry.memory = decision.memory;
    const busy =
      Object.values(decision.memory.demand.ratePerSec).some((r) => r > 1e-9) ||
      Object.keys(state.reserved).length > 0 ||
      state.inUse.length > 0;
    if (busy) entry.lastBusyMs = this.d.now();
    if (this.d.now() - entry.lastBusyMs > this.d.idleMs) this.active.delete(key);
    else this.active.set(key, entry);
    if (this.sample.size < 16 || this.sample.has(key)) {
      // A bounded sample of keys: label cardinality stays fixed.
      this.sample.set(key, { targets: { ...decision.targets }, recovering: state.recovering });
      for (const [region, target] of Object.entries(decision.targets)) {
        this.d.metrics?.share.set({ key, region }, target);
      }
    }
    await this.returns(key, p.policy, this.withExcludedReturns(decision.returns, state.inUse));
    await this.grants(key, p.policy, state, decision.grants);
    return moved;
  }

  /**
   * Loans in use from a lender whose clock may be off by more than the margin
   * are returned early: with the lender's clock ahead, its reservation may
   * lapse (deadline + ε on its clock) before this region stops using the
   * loan (deadline − ε on ours); an early return frees it only on receipt.
   */
  private withExcludedReturns(
    returns: readonly { lender: string; seq: number }[],
    inUse: KeyReading["inUse"],
  ): readonly { lender: string; seq: number }[] {
    const extra = inUse.filter(
      (l) => this.d.excluded(l.lender) && !returns.some((r) => r.lender === l.lender && r.seq >= l.seq),
    );
    return extra.length === 0
      ? returns
      : [...returns, ...extra.map((l) => ({ lender: l.lender, seq: l.seq }))];
  }

  /** Returns first: they free this region's use before anything else. */
  private async returns(
    key: string,
    policy: KeyPolicy,
    returns: readonly { lender: string; seq: number }[],
  ): Promise<void> {
    for (const ret of returns) {
      try {
        const mark = await this.d.store.returnLoan(policy, ret.lender, ret.seq);
        if (mark) {
          this.d.durable.mark(key, "return", `${mark.lender}>${mark.borrower}`, mark.seq);
          this.d.replica.applyLocal(key, KeyRecord.returnLoan(KeyRecord.initial(), mark));
          this.loansReturned++;
          this.d.metrics?.loans.inc({ event: "returned" });
        }
      } catch (err) {
        this.d.onError?.(`return ${key}`, err);
      }
    }
  }

  private async grants(
    key: string,
    policy: KeyPolicy,
    state: KeyReading,
    grants: Readonly<Record<string, number>>,
  ): Promise<void> {
    for (const [borrower, units] of Object.entries(grants)) {
      if (units <= 0) continue;
      // A loan to a region we cannot reach would only be reserved here, never
      // used there: skip it, so a partition returns our share to us within
      // D + ε instead of after the borrower's demand estimate decays.
      if (!this.d.link.isUp(borrower)) continue;
      // Nor to one whose clock may be off by more than the margin (DESIGN §1.2).
      if (this.d.excluded(borrower)) continue;
      try {
        const loan = await this.d.store.grantLoan(policy, borrower, units);
        if (loan) {
          const renewal = (state.current[borrower] ?? 0) > 0;
          this.d.durable.mark(key, "loan", `${loan.lender}>${loan.borrower}`, loan.seq);
          this.d.replica.applyLocal(key, KeyRecord.grantLoan(KeyRecord.initial(), loan));
          this.loansGranted++;
          this.d.metrics?.loans.inc({ event: renewal ? "renewed" : "granted" });
        } else this.d.metrics?.loans.inc({ event: "refused" });
      } catch (err) {
        this.d.onError?.(`grant ${key}`, err);
      }
    }
  }
}

/**
 * A move of at least this much of some region's target (5% of the key's rate) is a shift in
 * demand worth following at the fast cadence; smaller moves past the hysteresis band are
 * noise being absorbed (measured in the simulation: under a steady hot spot ~4% of rounds are
 * fast, all in the first second; with the hot spot jumping every 1–4 s about half).
 */
export const FAST_ROUND_MOVE_PPM = 50_000;

/**
 * Whether this round's targets moved from last round's by FAST_ROUND_MOVE_PPM or more. The
 * first round after a restart (no previous) has nothing to compare with: not moved.
 */
function targetsMoved(
  previous: Readonly<Record<string, number>> | undefined,
  next: Readonly<Record<string, number>>,
): boolean {
  if (previous === undefined) return false;
  for (const [region, t] of Object.entries(next)) {
    if (Math.abs((previous[region] ?? 0) - t) >= FAST_ROUND_MOVE_PPM) return true;
  }
  return false;
}
