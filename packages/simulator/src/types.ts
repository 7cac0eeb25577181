// Options of the whole-protocol model and the planted bugs it can switch on.

/** Deliberately unsafe variants: each must make a checker fail (the oracle is not vacuous). */
export interface PlantedBugs {
  /** (a) trap 2: the borrower uses a loan until deadline + ε instead of deadline − ε. */
  readonly borrowerLate?: boolean;
  /** (b) trap 3: a lender lends from its current share (borrowed units too) and below its floor. */
  readonly relendBorrowed?: boolean;
  /** (c) trap 4: after state loss the region comes back with no recovery and full buckets. */
  readonly skipRecovery?: boolean;
  /** (d) trap 1: lazy refill credits the share in force at `now` over the whole interval. */
  readonly coarseRefill?: boolean;
  /** (e) trap 6: the leased client times its lease from the reply instead of from the send. */
  readonly leaseFromReceipt?: boolean;
  /** (f) DESIGN §4: checks and lease grants are answered before the replica has them (no WAIT). */
  readonly undurableAdmissions?: boolean;
  /**
   * (g) issue 15: a policy version grows (completes) as soon as every region
   * acked it, without the D + 2ε wait (the daemons' rollout waitUs = 0).
   */
  readonly growBeforeAllAcks?: boolean;
  /**
   * (h) issue 21: a replica attached after start is neither waited for (WAIT
   * counts the configured replicas, not the connected ones) nor noticed by
   * the primary watchers (the replica count checked only at start).
   */
  readonly lateReplicaUncovered?: boolean;
  /** (i) issue 21: the primary watchers do not re-check maxmemory-policy (eviction checked only at start). */
  readonly evictionUnnoticed?: boolean;
  /**
   * (j) issue 21: a WAIT certifies the writes of its caller when no failover
   * happened between the WAIT's start and its answer (instead of between the
   * write and the answer): a WAIT entered while the connection reconnected
   * behind one address is answered by the new primary for a write made on the old one.
   */
  readonly certifyAcrossFailover?: boolean;
}

export interface FaultOptions {
  readonly dropRate: number;
  readonly duplicateRate: number;
  /** One-way latency, uniform in [min, max] µs (random latency also reorders). */
  readonly latencyMinUs: number;
  readonly latencyMaxUs: number;
  /** Mean time between partition events (0: none); each lasts uniform [0.5, 5] s. */
  readonly partitionEveryUs: number;
  /** Region state losses (Redis wiped) during the run. */
  readonly stateLosses: number;
  /** Daemon restarts (memory lost, Redis kept) during the run. */
  readonly daemonRestarts: number;
  /** Failovers: the region's replica is promoted and the writes it had not received are lost. */
  readonly failovers: number;
  /**
   * Replica stalls: the replication stream stops for 0.1–2 s (WAITs in it time
   * out, so grants and returns are held back); a failover may end one.
   */
  readonly replicaStalls: number;
  /** Probability that any one WAIT times out although the replica is streaming. */
  readonly waitFailRate: number;
  /** The daemon of a region that fails over is down from before the failover for up to this long (0: stays up). */
  readonly daemonDownAtFailoverUs: number;
  /**
   * Policy changes (C, r and every region's weight) during the run: 0, 1 or 2,
   * each a proposal pushed into a random region's Redis at a random time and
   * rolled out by the daemons (issue 15).
   */
  readonly policyChanges: number;
  /**
   * Late replicas (issue 21): a second replica attaches to a region's primary
   * inside the fault window, lags (receives nothing more), and is promoted
   * 0.3–2.5 s later. Default 0.
   */
  readonly lateReplicas?: number;
  /**
   * Evictions (issue 21): `maxmemory-policy` switched to an evicting one for
   * 0.3–2 s. Memory pressure starts at the first primary-watcher tick after
   * the switch (the model's reading of "the window between ticks", which it
   * leaves out): from then until the switch back, the key is evicted every
   * 50–400 ms. Default 0.
   */
  readonly evictions?: number;
  /**
   * Failovers keep the address (issue 21): a WAIT entered up to the WAIT
   * timeout before a failover starts on the reconnected connection, i.e. on
   * the new primary. Default false (a failover kills the connection).
   */
  readonly failoverBehindAddress?: boolean;
  /** Scripted state losses of region index `region` at `atUs` (targeted tests). */
  readonly wipes?: readonly { readonly atUs: number; readonly region: number }[];
  /** Scripted daemon outages of region index `region` over [atUs, untilUs) (targeted tests). */
  readonly daemonDowns?: readonly {
    readonly atUs: number;
    readonly untilUs: number;
    readonly region: number;
  }[];
  /** Scripted isolations of region index `isolate` over [atUs, untilUs) (targeted tests). */
  readonly isolations?: readonly {
    readonly atUs: number;
    readonly untilUs: number;
    readonly isolate: number;
  }[];
  /**
   * Scripted clock steps: at real `atUs` region index `region`'s Redis clock
   * jumps forward by `stepUs` (an NTP step, a VM migration). Forward only: a
   * clock that ran ahead of the others frees its reservations early.
   */
  readonly clockSteps?: readonly {
    readonly atUs: number;
    readonly region: number;
    readonly stepUs: number;
  }[];
}

/** In-process leased clients (DESIGN §7) using the model's lease scripts. */
export interface ClientOptions {
  /** Clients per region (each region draws 0..perRegionMax). */
  readonly perRegionMax: number;
  /** Share of a region's requests its clients serve (the rest go to the check script). */
  readonly leasedFraction: number;
  /** Largest batch a client asks for (uniform 1..batchMax). */
  readonly batchMax: number;
  /** Lease durations asked, uniform in [min, max] µs (max ≤ D). */
  readonly leaseMinUs: number;
  readonly leaseMaxUs: number;
  /** Mean time between a client's early closes (0: never closes early). */
  readonly closeEveryUs: number;
  /** The client stops using a lease this long before send + granted duration. */
  readonly marginUs: number;
}

/** How a policy change is applied (DESIGN §3 "Policy changes are replicated state"). */
export interface PolicyChangeRule {
  /**
   * Growth (a larger C, r or base) waits for every region to have applied the
   * shrink, then this long (loans granted from an old, larger base must have
   * lapsed: D + 2ε).
   */
  readonly growAfterUs: number;
}

export type DemandMode =
  /** Random rates per region, re-drawn every 1–4 s, often with one hot region. */
  | { readonly kind: "random" }
  /** One region demands `ratio` × r, the others nothing; `shiftAtUs` moves it to the next region. */
  | { readonly kind: "hot"; readonly ratio: number; readonly shiftAtUs?: number }
  /** Scripted: from each `atUs` on, region i demands `rates[i]` × r. */
  | {
      readonly kind: "phases";
      readonly phases: readonly { readonly atUs: number; readonly rates: readonly number[] }[];
    };

export interface ModelOptions {
  readonly seed: number;
  readonly regions: number;
  /**
   * The key's algorithm (leases are token-bucket only: clients need "token_bucket"). A window
   * algorithm is judged per window (Σ over regions of one window's admissions ≤ C, docs/design.md
   * §1.1) instead of over every interval, and its policy changes keep C and r (only the weights move).
   */
  readonly algorithm: "token_bucket" | "gcra" | "fixed_window" | "sliding_window" | "sliding_log";
  /** The window of a window algorithm, ms (default 1000). */
  readonly windowMs?: number;
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly floorPpm: number;
  readonly epsilonUs: number;
  readonly loanDurationUs: number;
  /** Each region's Redis clock offset, uniform in [−spread/2, +spread/2] (any two differ ≤ spread). */
  readonly clockSpreadUs: number;
  readonly roundMinUs: number;
  readonly roundMaxUs: number;
  /** Run length with demand and faults, then a quiet phase (healed, no demand) for convergence. */
  readonly durationUs: number;
  readonly quiesceUs: number;
  /** Every this many rounds a daemon sends its whole record (anti-entropy). */
  readonly fullSyncEveryRounds: number;
  readonly maxCost: number;
  readonly demand: DemandMode;
  readonly faults: FaultOptions;
  readonly clients: ClientOptions;
  /** False: daemons never lend or borrow (static slices; DaemonOptions.reweighting). */
  readonly reweighting: boolean;
  /**
   * The daemons' clock check (DaemonOptions.clockCheck, config `gossip.clock`):
   * exclude a peer above safeFraction·2ε, resume at resumeFraction·2ε. Absent:
   * off, so the random scenarios keep lending across offsets up to the full 2ε
   * spread, where the loan margins are tight (a checking daemon would refuse).
   */
  readonly clockCheck?: { readonly safeFraction: number; readonly resumeFraction: number };
  readonly policyRule: PolicyChangeRule;
  readonly bugs: PlantedBugs;
}

export interface ModelResult {
  readonly seed: number;
  readonly ok: boolean;
  /** First checker failure, with the seed and the instant. */
  readonly failure: string | undefined;
  readonly admitted: number;
  readonly denied: number;
  /** Max over the run of Σ s_i(t) − U (≤ 0 when safe). */
  readonly worstShareExcess: number;
  /** Worst G1 excess seen, cost units (≤ 0 when safe). */
  readonly worstWindowExcess: number;
  /** Admitted / (r·T) over [measureFromUs, end of demand] (hot-region runs). */
  readonly utilization: number;
  /** Hot mode with a shift: µs from the shift until the new hot region holds ≥ 95% of its target share. */
  readonly reweightUs: number | undefined;
  readonly loansGranted: number;
  readonly returns: number;
  readonly leases: number;
  readonly failovers: number;
  /** Writes a failover lost (summed over failovers). */
  readonly lostWrites: number;
  readonly waitFailures: number;
  /** Admissions and lease grants refused because their WAIT failed (durable admissions). */
  readonly undurableAdmissions: number;
  /** Late replicas attached (issue 21). */
  readonly lateReplicas: number;
  /** Evictions of the key while a policy was evicting (issue 21). */
  readonly evictions: number;
  /** WAITs that a failover behind one address moved onto the new primary (issue 21). */
  readonly reconnectedWaits: number;
  /** Clock check: peers taken out of lending after being in (and let back in), summed over daemons. */
  readonly clockExclusions: number;
  readonly clockResumes: number;
  /** When every region's snapshot first had the last proposed policy version completed (undefined: never). */
  readonly policyCompletedUs: number | undefined;
  readonly events: number;
}
