// One region's Redis for the model's single key, driven through the
// @geoquota/lease reference model (the same arithmetic as the Lua scripts),
// plus the conversions to and from the gossiped CRDT record. The planted bugs
// are injected here, around the reference operations, never inside them.
import { KeyRecord, type Loan } from "@geoquota/crdt";
import {
  applyShareChange,
  check,
  emptyKeyState,
  freshIncarnation,
  grantLoan,
  type KeyLimit,
  type KeyState,
  loadBucket,
  loanUsable,
  mergeRemote,
  parseMarker,
  type ReceivedLoan,
  type RegionState,
  receiveReturn,
  recoveryEndUs,
  reservedAt,
  returnLoan,
  type Schedule,
  type ShareInputs,
  shareAt,
  shareBreakpoints,
  shareInputs,
  storeBucket,
  type Timing,
} from "@geoquota/lease";
import type { InboundLoan } from "../policy/index.js";
import type { PlantedBugs } from "./types.js";

export class ModelRegion {
  readonly id: string;
  readonly limit: KeyLimit;
  readonly timing: Timing;
  private readonly bugs: PlantedBugs;
  state: RegionState;
  key: KeyState;
  /** Set by every script that changes what gossip carries (the shard's `gq:{s<k>}:dirty` feed). */
  dirty = true;

  constructor(id: string, limit: KeyLimit, timing: Timing, bugs: PlantedBugs, startUs: number) {
    this.id = id;
    this.limit = limit;
    this.timing = timing;
    this.bugs = bugs;
    // A cluster started from empty servers: no recovery, full buckets.
    this.state = { region: id, marker: freshIncarnation(startUs) };
    this.key = emptyKeyState();
  }

  /** FLUSHALL: every key and the incarnation marker are gone. */
  wipe(nowUs: number): void {
    this.state = {
      region: this.id,
      marker: this.bugs.skipRecovery === true ? freshIncarnation(nowUs) : undefined,
    };
    this.key = emptyKeyState();
    this.dirty = true;
  }

  recoveryEnd(): number {
    const m = this.state.marker;
    return m === undefined ? Number.POSITIVE_INFINITY : recoveryEndUs(parseMarker(m).bornUs, this.timing);
  }

  /** s(t) as the region's limiter would compute it at its local time t (0 with no state at all). */
  shareAt(localUs: number): number {
    const inp = this.inputs();
    return inp === undefined ? 0 : shareAt(inp, localUs);
  }

  // The checker reads every share after every event: cache the inputs (the
  // book is mutated in place, so the object stays valid until a wipe or a
  // new marker) instead of re-parsing the marker each time.
  private cached: { marker: string; key: KeyState; inputs: ShareInputs } | undefined;
  private inputs(): ShareInputs | undefined {
    const m = this.state.marker;
    if (m === undefined) return undefined;
    const c = this.cached;
    if (c !== undefined && c.marker === m && c.key === this.key) return c.inputs;
    const inputs = shareInputs(this.key, this.limit, this.timing, m);
    this.cached = { marker: m, key: this.key, inputs };
    return inputs;
  }

  /** Local instants after `localUs` where the share changes without a script. */
  breakpoints(localUs: number): number[] {
    const inp = this.inputs();
    return inp === undefined ? [] : shareBreakpoints(inp, localUs);
  }

  check(cost: number, nowUs: number): boolean {
    this.coarsen(nowUs);
    const out = check(this.state, this.key, this.limit, this.timing, cost, nowUs);
    this.dirty = true;
    return out.allowed;
  }

  recovering(nowUs: number): boolean {
    return nowUs < this.recoveryEnd();
  }

  /** Per borrower, units still reserved at now. */
  reserved(nowUs: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [b, entries] of this.key.book.outstanding) {
      const r = reservedAt(entries, nowUs, this.timing.epsilonUs);
      if (r > 0) out[b] = r;
    }
    return out;
  }

  /** Per borrower, units of the latest grant still outstanding. */
  current(nowUs: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [b, g] of this.key.book.granted) {
      if (nowUs < g.deadlineUs + this.timing.epsilonUs) out[b] = g.units;
    }
    return out;
  }

  inUse(nowUs: number): InboundLoan[] {
    const out: InboundLoan[] = [];
    for (const [lender, l] of this.key.book.received) {
      if (loanUsable(l, this.key.book.returned.get(lender) ?? 0, nowUs, this.timing.epsilonUs)) {
        out.push({ lender, units: l.units, seq: l.seq });
      }
    }
    return out;
  }

  grant(borrower: string, units: number, nowUs: number): boolean {
    this.coarsen(nowUs);
    if (this.bugs.relendBorrowed === true) return this.grantUnchecked(borrower, units, nowUs);
    const out = grantLoan(
      this.state,
      this.id,
      this.key,
      this.limit,
      this.timing,
      borrower,
      units,
      this.timing.loanDurationUs,
      nowUs,
    );
    if (out.ok) this.dirty = true;
    return out.ok;
  }

  /** Bug (b): loan_grant.lua without its recovery and floor checks. */
  private grantUnchecked(borrower: string, units: number, nowUs: number): boolean {
    if (borrower === this.id || !(units > 0)) return false;
    const live = loadBucket(this.state, this.key, this.limit, this.timing, nowUs);
    const book = this.key.book;
    const seq = nowUs > book.lastSeq ? nowUs : book.lastSeq + 1;
    const loan = { units, deadlineUs: nowUs + this.timing.loanDurationUs, seq };
    book.lastSeq = seq;
    book.granted.set(borrower, loan);
    book.outstanding.set(borrower, [...(book.outstanding.get(borrower) ?? []), loan]);
    applyShareChange(live, this.key, this.limit, this.timing, nowUs);
    storeBucket(this.key, live, this.limit);
    this.dirty = true;
    return true;
  }

  /** Borrower: stop using the loan now, remember its seq; gossip tells the lender. */
  giveBack(lender: string, nowUs: number): boolean {
    this.coarsen(nowUs);
    const out = returnLoan(this.state, this.key, this.limit, this.timing, lender, nowUs);
    if (out.seq > 0) this.dirty = true;
    return out.seq > 0;
  }

  /** What this region's daemon ships: its counters, its own grants, its own return marks. */
  record(): KeyRecord {
    const r = KeyRecord.initial();
    for (const [field, v] of this.key.counters) {
      const bar = field.indexOf("|");
      const kind = field.slice(0, bar);
      const replica = field.slice(bar + 1);
      if (kind === "p") r.consumed.p.set(replica, v);
      else if (kind === "n") r.consumed.n.set(replica, v);
      else if (kind === "d") r.denied.set(replica, v);
    }
    for (const [borrower, g] of this.key.book.granted) {
      const loan: Loan = { lender: this.id, borrower, units: g.units, deadlineUs: g.deadlineUs, seq: g.seq };
      r.loans.set(`${this.id}>${borrower}`, loan);
    }
    for (const [lender, seq] of this.key.book.returned) {
      r.returned.set(`${lender}>${this.id}`, { lender, borrower: this.id, seq });
    }
    return r;
  }

  /** lua merge: counters by max, loans addressed here, returns of loans granted here. */
  merge(rec: KeyRecord, nowUs: number): void {
    this.coarsen(nowUs);
    const counters = new Map<string, number>();
    for (const [rep, v] of rec.consumed.p) counters.set(`p|${rep}`, v);
    for (const [rep, v] of rec.consumed.n) counters.set(`n|${rep}`, v);
    for (const [rep, v] of rec.denied) counters.set(`d|${rep}`, v);
    const loans: ReceivedLoan[] = [];
    for (const l of rec.loans.values()) {
      if (l.borrower !== this.id || l.lender === this.id) continue;
      const deadlineUs =
        this.bugs.borrowerLate === true ? l.deadlineUs + 2 * this.timing.epsilonUs : l.deadlineUs;
      loans.push({ lender: l.lender, loan: { units: l.units, deadlineUs, seq: l.seq } });
    }
    let changed = false;
    for (const [field, v] of counters) if (v > (this.key.counters.get(field) ?? 0)) changed = true;
    const res = mergeRemote(this.state, this.id, this.key, this.limit, this.timing, loans, counters, nowUs);
    if (res.changed > 0) changed = true;
    for (const m of rec.returned.values()) {
      if (m.lender !== this.id) continue;
      const out = receiveReturn(this.state, this.key, this.limit, this.timing, m.borrower, m.seq, nowUs);
      if (out.dropped > 0) changed = true;
    }
    if (changed) this.dirty = true;
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
