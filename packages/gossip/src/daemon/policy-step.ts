// The daemon's policy step for one key in a round: run the re-weighting
// policy on the merged counters and this region's loan view, then carry out
// its decision through the store's scripts — early returns first (they free
// this region's use), then grants and renewals to reachable borrowers. Each
// loan or return that the store made durable enters the map (and the
// durability ledger) to be shipped. Also keeps the watched set (keys that need
// a policy run every round whether or not they changed: loans to renew or
// return, targets away from the bases), each recently run key's demand
// estimate, and a bounded sample of targets for /v1/status.
import type { KeyPolicy } from "@geoquota/core";
import { KeyRecord, type Replica } from "@geoquota/crdt";
import {
  type CounterReading,
  computeTargets,
  decideRound,
  initialPolicyMemory,
  observeDemand,
  type PolicyMemory,
  type PolicyOptions,
  type RegionQuota,
} from "../policy/index.js";
import type { DurableLedger } from "./durable-ledger.js";
import type { FrameLink } from "./frames.js";
import type { DaemonMetrics } from "./metrics.js";
import type { DaemonStore, KeyReading } from "./store-port.js";

interface KeyMemory {
  memory: PolicyMemory;
  /** When the key last ran (monotonic ms). */
  lastRunMs: number;
  /** Runs every round until a run finds nothing to keep watching (watchReason). */
  watch: boolean;
  /** The highest demand ÷ base rate over the regions at the last run (how much the estimate matters). */
  demandRatio: number;
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
  /**
   * How long the demand estimate of a key that is not watched outlives its last run, ms, when
   * its demand was below MEMORY_DEMAND_RATIO of every base rate (a colder key's next run starts
   * a new estimate from that reading); above it, `idleMs`.
   */
  readonly memoryMs: number;
  /** The rounds' minMs: the least time wouldMove lets pass since a key's last run. */
  readonly minRoundMs: number;
  /** Monotonic ms. */
  readonly now: () => number;
  readonly onError: ((where: string, err: unknown) => void) | undefined;
  /** The clock check excludes this peer: no loans to it, its loans to us are returned (DESIGN §1.2). */
  readonly excluded: (peer: string) => boolean;
}

/**
 * A key whose demand reached this share of some region's base rate keeps its estimate for
 * `idleMs` after its last run; a colder one only for `memoryMs` (issue 24 point 7: a million
 * keys touched now and then must not each hold an estimate).
 */
export const MEMORY_DEMAND_RATIO = 0.1;

export class PolicyStep {
  /** Keys run lately, oldest run first (a run moves its key to the end): their estimates. */
  private readonly memo = new Map<string, KeyMemory>();
  private readonly watched = new Set<string>();
  /** Keys to run next round whatever the change feed says (peers changed them). */
  private readonly pending = new Set<string>();
  readonly sample = new Map<string, { targets: Record<string, number>; recovering: boolean }>();
  loansGranted = 0;
  loansReturned = 0;

  constructor(private readonly d: PolicyStepDeps) {}

  /**
   * The keys this round must run besides the changed ones: every watched key, and those peers
   * changed since the last call. Work per round follows the keys that changed or hold share
   * away from the bases, not every key ever seen. Also forgets estimates past their lifetime.
   */
  roundKeys(): string[] {
    const keys = [...this.watched];
    for (const k of this.pending) if (!this.watched.has(k)) keys.push(k);
    this.pending.clear();
    this.forget();
    return keys;
  }

  /** Keys that get a policy run every round, whether or not they changed. */
  get activeCount(): number {
    return this.watched.size;
  }

  /** Estimates held (keys run lately). */
  get memoryCount(): number {
    return this.memo.size;
  }

  /** Peers changed this key: run it next round (their demand may call for a loan). */
  activate(key: string): void {
    this.pending.add(key);
  }

  private forget(): void {
    const now = this.d.now();
    for (const [key, m] of this.memo) {
      const age = now - m.lastRunMs;
      // Oldest run first: the first entry still within the shorter lifetime ends the scan.
      if (age <= this.d.memoryMs) break;
      if (m.watch || (m.demandRatio >= MEMORY_DEMAND_RATIO && age <= this.d.idleMs)) continue;
      this.memo.delete(key);
      this.sample.delete(key);
    }
  }

  /**
   * Whether what `from` just sent (in `merged`, the key's counters) would move this key's
   * targets by FAST_ROUND_MOVE_PPM or more if a round ran now. Only `from`'s estimate is carried
   * forward (over at least minMs, so a frame right after a round does not read as a spike): the
   * others' counters reach the map at their own frames and this region's at its rounds, so
   * their silence since the last run is no news. Nothing is kept. False for a key without a
   * recent run (its first run makes the estimate).
   */
  wouldMove(key: string, p: DaemonKey, merged: KeyRecord, from: string): boolean {
    const m = this.memo.get(key);
    const alg = p.policy.limit.algorithm;
    if (m === undefined || m.memory.targets === undefined || m.memory.demand.atUs === undefined) return false;
    if (alg !== "token_bucket" && alg !== "gcra") return false;
    const elapsedMs = Math.max(this.d.now() - m.lastRunMs, this.d.minRoundMs);
    const demand = observeDemand(
      m.memory.demand,
      countersOf(merged),
      m.memory.demand.atUs + elapsedMs * 1000,
      this.d.policy.demand,
    );
    const rates = { ...m.memory.demand.ratePerSec, [from]: demand.ratePerSec[from] ?? 0 };
    const targets = computeTargets(
      p.regions,
      rates,
      p.policy.limit.refillPerSecond,
      m.memory.targets,
      this.d.policy.targets,
    );
    return targetsMoved(m.memory.targets, targets);
  }

  /** A key without a policy run: watched only while its record holds a loan or return no wait covered. */
  watchUndurable(key: string, undurable: boolean): void {
    if (undurable) this.watched.add(key);
    else this.watched.delete(key);
  }

  /**
   * Runs the policy for `key` (its Redis view `state`, its merged record) and executes the
   * decision. True when the key's targets moved this round by FAST_ROUND_MOVE_PPM or more:
   * shares are on their way somewhere, and the daemon's next round comes sooner (daemon.ts).
   */
  async run(
    key: string,
    p: DaemonKey,
    state: KeyReading,
    merged: KeyRecord,
    undurable = false,
  ): Promise<boolean> {
    const entry = this.memo.get(key) ?? {
      memory: initialPolicyMemory(),
      lastRunMs: this.d.now(),
      watch: false,
      demandRatio: 0,
    };
    const counters = countersOf(merged);
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
    entry.lastRunMs = this.d.now();
    entry.watch = undurable || watchReason(p, state, decision, moved) !== undefined;
    entry.demandRatio = demandRatio(p, decision.memory.demand.ratePerSec);
    // Re-inserted: the memo stays in order of last run (forget() scans from the oldest).
    this.memo.delete(key);
    this.memo.set(key, entry);
    if (entry.watch) this.watched.add(key);
    else this.watched.delete(key);
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

/** The demand reading of a record: admitted and denied cost per replica. */
function countersOf(r: KeyRecord): CounterReading {
  return { admitted: Object.fromEntries(r.consumed.p), denied: Object.fromEntries(r.denied) };
}

/**
 * Why a key needs a policy run next round even if nothing about it changes (undefined: it does
 * not; a change of its counters or loans brings it back through the change feed or a merge):
 * loans it lent (renewed every round while wanted) or uses (returned once the demand is gone),
 * a decision carried out this round, or targets away from the bases (a decaying demand moves
 * them back without any new count). Besides these, the daemon watches a key whose record holds
 * a loan or return no durability wait covered yet (it ships once a later read's wait does).
 */
export function watchReason(
  p: DaemonKey,
  state: KeyReading,
  decision: {
    readonly targets: Readonly<Record<string, number>>;
    readonly grants: Readonly<Record<string, number>>;
    readonly returns: readonly unknown[];
  },
  moved: boolean,
): string | undefined {
  if (state.inUse.length > 0) return "borrows";
  for (const v of Object.values(state.reserved)) if (v > 0) return "lends";
  for (const v of Object.values(state.current)) if (v > 0) return "lends";
  if (decision.returns.length > 0) return "returns";
  for (const v of Object.values(decision.grants)) if (v > 0) return "grants";
  if (moved) return "targets moving";
  for (const q of p.regions)
    if ((decision.targets[q.region] ?? q.baseShare) !== q.baseShare) return "targets off base";
  return undefined;
}

/** The highest demand ÷ base rate over the key's regions (0 when no region has a base). */
function demandRatio(p: DaemonKey, ratePerSec: Readonly<Record<string, number>>): number {
  let ratio = 0;
  for (const q of p.regions) {
    const baseRate = (p.policy.limit.refillPerSecond * q.baseShare) / 1_000_000;
    const d = ratePerSec[q.region] ?? 0;
    if (baseRate > 0) ratio = Math.max(ratio, d / baseRate);
    else if (d > 0) ratio = Math.max(ratio, MEMORY_DEMAND_RATIO);
  }
  return ratio;
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
