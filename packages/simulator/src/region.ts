// One region's Redis for the simulation's single key, by the @geoquota/core
// reference model (the same arithmetic as the Lua scripts), plus what a real
// deployment adds around it: an asynchronously replicated copy (the replica a
// failover promotes, losing the writes it had not received), the replication
// id the daemon polls, and the change feed. The planted bugs are injected here,
// around the reference operations, never inside them.
import {
  acquireLease,
  applyShareChange,
  check,
  emptyKeyState,
  freshIncarnation,
  grantLoan,
  type KeyLimit,
  type KeyState,
  type LoanEntry,
  loadBucket,
  mergeRemote,
  newIncarnation,
  parseMarker,
  type ReceivedLoan,
  type RegionState,
  receiveReturn,
  recoveryEndUs,
  releaseLease,
  returnLoan,
  type Schedule,
  type ShareInputs,
  settle,
  shareAt,
  shareBreakpoints,
  shareInputs,
  storeBucket,
  type Timing,
} from "@geoquota/core";
import type { PlantedBugs } from "./types.js";

interface Snapshot {
  readonly marker: string | undefined;
  readonly ridRecorded: number;
  readonly key: KeyState;
  readonly dirty: boolean;
  readonly policy: string | null;
  readonly proposals: readonly string[];
}

function cloneKey(k: KeyState): KeyState {
  return structuredClone(k);
}

export class ModelRedis {
  readonly id: string;
  readonly timing: Timing;
  private readonly bugs: PlantedBugs;
  state: RegionState;
  key: KeyState;
  /** The shard's change feed (`gq:{s<k>}:dirty`): set by every write to the key. */
  dirty = true;
  /** `gq:policy`: the daemon's policy snapshot (JSON), what the limiters read. */
  policy: string | null = null;
  /** `gq:policy:proposals` (JSON entries). */
  proposals: string[] = [];
  /** `master_replid` of the current primary; a failover changes it. */
  replid = 1;
  /** The replid recorded with the marker (`gq:{s<k>}:rid`). */
  ridRecorded = 1;
  /** What the replica holds (asynchronous replication: it lags the primary). */
  private replica: Snapshot;
  /** Loans granted and returned (statistics). */
  grants = 0;
  returns = 0;
  /** Writes since the last replication (lost if a failover happens now). */
  unreplicatedWrites = 0;
  /**
   * Replication keeps a copy only while > 0 (a deep clone per catch-up is the
   * simulation's largest cost): the harness arms it (armReplica) only in the
   * seconds before a failover, the only instant the replica's content is read.
   */
  private replicaArmed = 0;
  /**
   * A replica attached after start (DESIGN §4 "Checked continuously"): in
   * sync when it attached, then lagging (it receives nothing more, its acks
   * stay behind). A failover while it is attached promotes it.
   */
  private late: { readonly snap: Snapshot; writes: number } | undefined;
  /** `maxmemory-policy` is evicting (with a maxmemory): a drift of the setup. */
  evicting = false;

  constructor(id: string, timing: Timing, bugs: PlantedBugs, startUs: number) {
    this.id = id;
    this.timing = timing;
    this.bugs = bugs;
    // A cluster started from empty servers: no recovery, full buckets.
    this.state = { region: id, marker: freshIncarnation(startUs) };
    this.key = emptyKeyState();
    this.replica = this.snapshotNow();
  }

  private snapshotNow(): Snapshot {
    return {
      marker: this.state.marker,
      ridRecorded: this.ridRecorded,
      key: cloneKey(this.key),
      dirty: this.dirty,
      policy: this.policy,
      proposals: [...this.proposals],
    };
  }

  /**
   * Starts keeping the replica's copy. While disarmed the copy is stale, so
   * arming is a catch-up: the replica receives every write so far (a stream
   * delivery at this instant). The harness arms before any stall that can end
   * in the failover starts; should another stall of the region cover the
   * instant, the replica only ends up more complete (the failover forgets
   * less), never less.
   */
  armReplica(): void {
    this.replicaArmed++;
    if (this.replicaArmed === 1) {
      this.replica = this.snapshotNow();
      this.unreplicatedWrites = 0;
    }
  }

  disarmReplica(): void {
    this.replicaArmed--;
  }

  /** The replica catches up with every write so far (replication stream, or a WAIT that succeeded). */
  replicate(): void {
    if (this.unreplicatedWrites === 0) return;
    if (this.replicaArmed > 0) this.replica = this.snapshotNow();
    this.unreplicatedWrites = 0;
  }

  /** A second replica attaches (full sync: it has every write so far), then lags. */
  attachLateReplica(): void {
    this.late = { snap: this.snapshotNow(), writes: 0 };
  }

  /** `connected_slaves` of INFO replication. */
  connectedReplicas(): number {
    return this.late === undefined ? 1 : 2;
  }

  /** The late replica misses writes: a WAIT that needs every connected replica times out. */
  lateReplicaLags(): boolean {
    return this.late !== undefined && this.late.writes > 0;
  }

  /**
   * An eviction under memory pressure: every key with a TTL goes (the bucket,
   * the loan book, the counters, the leases); the incarnation marker, the
   * replid record and the policy snapshot (no TTL) survive. The eviction is
   * propagated to the replica like a write.
   */
  evict(): void {
    this.key = emptyKeyState();
    this.wrote();
  }

  /** rotateIncarnation: a new marker born now (recovery); DESIGN §4 for an evicting policy seen by a watcher. */
  rotate(nowUs: number): void {
    this.state.marker = newIncarnation(nowUs);
    this.wrote();
  }

  /**
   * The replica is promoted: the writes it had not received are lost, the
   * marker it holds survives (if the primary had one when it last replicated),
   * and the new primary has another replication id. With a late replica
   * attached, it is the one promoted (the lagging one: the worst case).
   */
  failover(): number {
    const late = this.late;
    this.late = undefined;
    const lost = late !== undefined ? late.writes : this.unreplicatedWrites;
    const s = late !== undefined ? late.snap : this.replica;
    this.state = { region: this.id, marker: s.marker };
    this.ridRecorded = s.ridRecorded;
    this.key = cloneKey(s.key);
    this.policy = s.policy;
    this.proposals = [...s.proposals];
    this.dirty = true;
    this.replid++;
    this.unreplicatedWrites = 0;
    this.replica = this.snapshotNow();
    return lost;
  }

  /**
   * limiter replication.ts checkPrimary: a replid other than the recorded one
   * rotates the marker (a new incarnation born now: recovery). Returns whether it did.
   */
  checkPrimary(nowUs: number): boolean {
    if (this.replid === this.ridRecorded) return false;
    this.ridRecorded = this.replid;
    if (this.bugs.skipRecovery !== true) this.state.marker = newIncarnation(nowUs);
    this.wrote();
    return true;
  }

  /** FLUSHALL: every key and the incarnation marker are gone. */
  wipe(nowUs: number): void {
    this.state = {
      region: this.id,
      marker: this.bugs.skipRecovery === true ? freshIncarnation(nowUs) : undefined,
    };
    this.key = emptyKeyState();
    this.policy = null;
    this.proposals = [];
    this.wrote();
  }

  /** The CLI orchestrator's seed snapshot, written before anything runs (the replica has it). */
  seedPolicy(raw: string): void {
    this.policy = raw;
    this.replica = this.snapshotNow();
  }

  /** SET gq:policy (a write the replica may not have yet). */
  writePolicy(raw: string): void {
    this.policy = raw;
    this.unreplicatedWrites++;
    if (this.late !== undefined) this.late.writes++;
  }

  private wrote(): void {
    this.dirty = true;
    this.unreplicatedWrites++;
    if (this.late !== undefined) this.late.writes++;
  }

  recoveryEnd(): number {
    const m = this.state.marker;
    return m === undefined ? Number.POSITIVE_INFINITY : recoveryEndUs(parseMarker(m).bornUs, this.timing);
  }

  recovering(nowUs: number): boolean {
    return nowUs < this.recoveryEnd();
  }

  // The checker reads every share after every event: cache the inputs (the
  // book is mutated in place, so the object stays valid until a wipe, a new
  // marker or another policy).
  private cached: { marker: string; key: KeyState; limit: KeyLimit; inputs: ShareInputs } | undefined;
  private inputs(limit: KeyLimit): ShareInputs | undefined {
    const m = this.state.marker;
    if (m === undefined) return undefined;
    const c = this.cached;
    if (c !== undefined && c.marker === m && c.key === this.key && c.limit === limit) return c.inputs;
    const inputs = shareInputs(this.key, limit, this.timing, m);
    this.cached = { marker: m, key: this.key, limit, inputs };
    return inputs;
  }

  /** s(t) as the region's limiter would compute it at its local time t (0 with no state at all). */
  shareAt(limit: KeyLimit, localUs: number): number {
    const inp = this.inputs(limit);
    return inp === undefined ? 0 : shareAt(inp, localUs);
  }

  /** Local instants after `localUs` where the share changes without a script. */
  breakpoints(limit: KeyLimit, localUs: number): number[] {
    const inp = this.inputs(limit);
    const points = inp === undefined ? [] : shareBreakpoints(inp, localUs);
    for (const l of this.key.leases.values()) if (l.expiryUs > localUs) points.push(l.expiryUs);
    return points;
  }

  /**
   * The bucket's tokens at `localUs` (settled, nothing written) and the leased
   * tokens Redis still counts: what the per-region lease invariant reads.
   * Undefined without a marker or a bucket of this incarnation and policy.
   */
  tokensAt(limit: KeyLimit, localUs: number): { tokens: number; leased: number } | undefined {
    const tokens = this.bucketTokensAt(limit, localUs);
    if (tokens === undefined) return undefined;
    let leased = 0;
    for (const l of this.key.leases.values()) if (localUs < l.expiryUs) leased += l.tokens;
    return { tokens, leased };
  }

  // The lease checker reads every bucket after every event: remember which
  // stored bucket loadBucket would keep (same incarnation and policy) until
  // a script stores another one (storeBucket replaces the object).
  private kept: { bucket: KeyState["bucket"]; limit: KeyLimit; marker: string; kept: boolean } | undefined;

  /** The bucket's tokens at `localUs` as loadBucket settles them (undefined: it would rebuild it). */
  bucketTokensAt(limit: KeyLimit, localUs: number): number | undefined {
    const m = this.state.marker;
    const b = this.key.bucket;
    if (m === undefined || b === undefined || b.inc !== m) return undefined;
    if (limit.algorithm !== "token_bucket" || this.bugs.coarseRefill === true) {
      const live = loadBucket(this.state, this.key, limit, this.timing, localUs);
      return live.rebuilt ? undefined : live.tokens;
    }
    let k = this.kept;
    if (k === undefined || k.bucket !== b || k.limit !== limit || k.marker !== m) {
      // Asks loadBucket itself once per stored bucket (it settles nothing it stores).
      const live = loadBucket(this.state, this.key, limit, this.timing, localUs);
      k = { bucket: b, limit, marker: m, kept: !live.rebuilt };
      this.kept = k;
    }
    // loadBucket's token_bucket path: the stored value settled along its schedule.
    return k.kept
      ? settle(b.value, b.tsUs, b.schedule, limit.capacity, limit.refillPerSecond, localUs).tokens
      : undefined;
  }

  check(limit: KeyLimit, cost: number, nowUs: number): boolean {
    this.coarsen(nowUs);
    const out = check(this.state, this.key, limit, this.timing, cost, nowUs);
    this.wrote();
    return out.allowed;
  }

  /** lease_acquire.lua, with the release of the client's previous lease first (renewal). */
  acquireLease(
    limit: KeyLimit,
    release: { leaseId: string; used: number } | undefined,
    leaseId: string,
    tokens: number,
    durationUs: number,
    nowUs: number,
  ): { granted: number; expiryUs: number } {
    this.coarsen(nowUs);
    if (release !== undefined)
      releaseLease(this.state, this.key, limit, this.timing, release.leaseId, release.used, nowUs);
    const out = acquireLease(this.state, this.key, limit, this.timing, leaseId, tokens, durationUs, nowUs);
    this.wrote();
    return { granted: out.granted, expiryUs: out.expiryUs };
  }

  releaseLease(limit: KeyLimit, leaseId: string, used: number, nowUs: number): void {
    this.coarsen(nowUs);
    releaseLease(this.state, this.key, limit, this.timing, leaseId, used, nowUs);
    this.wrote();
  }

  grant(limit: KeyLimit, borrower: string, units: number, nowUs: number): LoanEntry | undefined {
    this.coarsen(nowUs);
    if (this.bugs.relendBorrowed === true) return this.grantUnchecked(limit, borrower, units, nowUs);
    const out = grantLoan(
      this.state,
      this.id,
      this.key,
      limit,
      this.timing,
      borrower,
      units,
      this.timing.loanDurationUs,
      nowUs,
    );
    if (!out.ok) return undefined;
    this.wrote();
    this.grants++;
    return out.loan;
  }

  /** Bug (b): loan_grant.lua without its recovery and floor checks. */
  private grantUnchecked(
    limit: KeyLimit,
    borrower: string,
    units: number,
    nowUs: number,
  ): LoanEntry | undefined {
    if (borrower === this.id || !(units > 0)) return undefined;
    const live = loadBucket(this.state, this.key, limit, this.timing, nowUs);
    const book = this.key.book;
    const seq = nowUs > book.lastSeq ? nowUs : book.lastSeq + 1;
    const loan = { units, deadlineUs: nowUs + this.timing.loanDurationUs, seq };
    book.lastSeq = seq;
    book.granted.set(borrower, loan);
    book.outstanding.set(borrower, [...(book.outstanding.get(borrower) ?? []), loan]);
    applyShareChange(live, this.key, limit, this.timing, nowUs);
    storeBucket(this.key, live, limit);
    this.wrote();
    return loan;
  }

  /** loan_return.lua (borrower): stop using the loan now, remember its seq. 0: nothing held. */
  giveBack(limit: KeyLimit, lender: string, nowUs: number): number {
    this.coarsen(nowUs);
    const out = returnLoan(this.state, this.key, limit, this.timing, lender, nowUs);
    if (out.seq > 0) {
      this.wrote();
      this.returns++;
    }
    return out.seq;
  }

  /** loan_merge.lua: counters by max, loans addressed here. */
  merge(
    limit: KeyLimit,
    loans: readonly ReceivedLoan[],
    counters: ReadonlyMap<string, number>,
    nowUs: number,
  ): void {
    this.coarsen(nowUs);
    const shifted =
      this.bugs.borrowerLate === true
        ? loans.map((l) => ({
            ...l,
            loan: { ...l.loan, deadlineUs: l.loan.deadlineUs + 2 * this.timing.epsilonUs },
          }))
        : loans;
    mergeRemote(this.state, this.id, this.key, limit, this.timing, shifted, counters, nowUs);
    this.wrote();
  }

  /** loan_return_received.lua (lender). */
  receiveReturn(limit: KeyLimit, borrower: string, seq: number, nowUs: number): void {
    this.coarsen(nowUs);
    const out = receiveReturn(this.state, this.key, limit, this.timing, borrower, seq, nowUs);
    if (out.dropped > 0) this.wrote();
  }

  /**
   * Bug (d): before a script loads the bucket, collapse its stored schedule
   * to the piece in force at `now`, so the settle credits today's share (and
   * clamps to today's capacity) over the whole interval since the last settle.
   */
  private coarsen(nowUs: number): void {
    if (this.bugs.coarseRefill !== true) return;
    const b = this.key.bucket;
    if (b === undefined || b.schedule.next.length === 0) return;
    let sc: Schedule = b.schedule;
    let i = 0;
    for (; i < sc.next.length; i++) {
      const p = sc.next[i];
      if (p === undefined || p.atUs > nowUs) break;
      sc = { share: p.share, outstanding: p.outstanding, next: sc.next };
    }
    b.schedule = { share: sc.share, outstanding: sc.outstanding, next: b.schedule.next.slice(i) };
  }
}
