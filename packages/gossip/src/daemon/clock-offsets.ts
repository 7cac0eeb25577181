// Peer clock offsets, NTP-style (docs/design.md §1.2 "Checked"). Pure: the
// daemon feeds it its own Redis TIME reads and the clock stamps peers send;
// times are µs, `mono*` from the daemon's monotonic clock, `redis*` Redis TIME.
//
// Every round the daemon reads its Redis TIME (tx, read between mono m0 and
// m1) and sends each peer a stamp { tx, echo, hold }: echo is the latest tx
// it received from that peer, hold the time from that receipt to m0 on its
// own monotonic clock. The receiver B of A's stamp knows when it read the
// echoed tx (its own m0 = b0) and when the stamp arrived (b4). A's Redis read
// R_A happened at a real instant t_A with
//   t_A − t_B ∈ [hold, b4 − b0]      (t_B: B's read of the echoed tx)
// since A read after receiving B's stamp, which left after B's read, and B
// received A's stamp after A's read. Hence the offset θ = clock_A − clock_B
// lies in [R_A − echo − (b4 − b0), R_A − echo − hold], whatever the two
// one-way delays: the estimate is its midpoint, the uncertainty half its
// width (the round trip less A's hold, halved). Both Redis clocks are taken
// to run at their daemon's monotonic rate over one round trip (drift of ppm).

export interface ClockStamp {
  /** The sender's Redis TIME this round, µs. */
  readonly txUs: number;
  /** The latest txUs the sender had received from the receiver (0: none yet). */
  readonly echoUs: number;
  /** Sender's monotonic µs from receiving `echoUs` to starting the read of `txUs`. */
  readonly holdUs: number;
}

export interface ClockCheckOptions {
  /** Exclude a peer when |offset| + uncertainty exceeds this (µs). */
  readonly excludeAboveUs: number;
  /** Re-admit it only once |offset| + uncertainty is at most this (µs, ≤ excludeAboveUs: hysteresis). */
  readonly resumeAtOrBelowUs: number;
  /** An estimate older than this (monotonic µs) is no estimate: the peer is excluded. */
  readonly maxSampleAgeUs: number;
}

export interface OffsetEstimate {
  /** clock_peer − clock_self, µs (midpoint of the interval). */
  readonly offsetUs: number;
  /** Half-width: the true offset lies in offsetUs ± uncertaintyUs. */
  readonly uncertaintyUs: number;
  /** Monotonic µs when the sample was taken. */
  readonly atMonoUs: number;
}

export interface PeerClockView {
  readonly estimate: OffsetEstimate | undefined;
  /** True while lending to and borrowing from the peer is off. */
  readonly excluded: boolean;
  /** Why, in words (logged on a change). */
  readonly reason: string;
}

export type SampleResult =
  | { readonly ok: true; readonly estimate: OffsetEstimate }
  | { readonly ok: false; readonly reason: string };

/** The interval of one exchange; exported for the property test of the bound. */
export function offsetInterval(
  stamp: ClockStamp,
  echoReadMonoUs: number,
  recvMonoUs: number,
): { lowUs: number; highUs: number } | undefined {
  const span = recvMonoUs - echoReadMonoUs;
  if (!(stamp.holdUs >= 0) || !(span >= stamp.holdUs)) return undefined;
  const base = stamp.txUs - stamp.echoUs;
  return { lowUs: base - span, highUs: base - stamp.holdUs };
}

/** How many of this daemon's own reads are remembered for matching echoes. */
const READS_KEPT = 64;

interface Received {
  readonly txUs: number;
  readonly atMonoUs: number;
}

interface Peer {
  /** The latest two stamps received (the latest may have come in during a read). */
  last: Received | undefined;
  prev: Received | undefined;
  estimate: OffsetEstimate | undefined;
  excluded: boolean;
  reason: string;
}

export class PeerClocks {
  private readonly peers = new Map<string, Peer>();
  /** Own Redis reads: tx → monotonic µs when the read started. */
  private readonly reads = new Map<number, number>();
  private current: { txUs: number; m0Us: number } | undefined;

  constructor(
    peers: readonly string[],
    private readonly opts: ClockCheckOptions,
  ) {
    if (!(opts.resumeAtOrBelowUs >= 0 && opts.resumeAtOrBelowUs <= opts.excludeAboveUs)) {
      throw new RangeError("clock check: expected 0 ≤ resumeAtOrBelowUs ≤ excludeAboveUs");
    }
    if (!(opts.maxSampleAgeUs > 0)) throw new RangeError("clock check: expected maxSampleAgeUs > 0");
    for (const p of peers)
      this.peers.set(p, {
        last: undefined,
        prev: undefined,
        estimate: undefined,
        excluded: true,
        reason: "no clock sample yet",
      });
  }

  /** This daemon read its Redis TIME: `redisUs`, the read sent at m0 and answered at m1. */
  localRead(redisUs: number, m0Us: number, m1Us: number): void {
    if (!(m1Us >= m0Us)) throw new RangeError("clock check: a read must end after it starts");
    this.reads.set(redisUs, m0Us);
    if (this.reads.size > READS_KEPT) this.reads.delete(this.reads.keys().next().value as number);
    this.current = { txUs: redisUs, m0Us };
  }

  /** The stamp for `peer` after the latest read (undefined before the first). */
  outgoing(peer: string): ClockStamp | undefined {
    const cur = this.current;
    const p = this.peers.get(peer);
    if (cur === undefined || p === undefined) return undefined;
    // Echo only a stamp received before the read started: hold must be ≥ 0.
    const rx = p.last !== undefined && p.last.atMonoUs <= cur.m0Us ? p.last : p.prev;
    if (rx === undefined || rx.atMonoUs > cur.m0Us) return { txUs: cur.txUs, echoUs: 0, holdUs: 0 };
    return { txUs: cur.txUs, echoUs: rx.txUs, holdUs: Math.round(cur.m0Us - rx.atMonoUs) };
  }

  /** A stamp from `peer` arrived at monotonic `recvMonoUs`. */
  incoming(peer: string, stamp: ClockStamp, recvMonoUs: number): SampleResult {
    const p = this.peers.get(peer);
    if (p === undefined) return { ok: false, reason: `unknown peer ${peer}` };
    p.prev = p.last;
    p.last = { txUs: stamp.txUs, atMonoUs: recvMonoUs };
    if (stamp.echoUs === 0) return { ok: false, reason: "no echo yet" };
    const readAt = this.reads.get(stamp.echoUs);
    if (readAt === undefined) return { ok: false, reason: "echo of a read this daemon no longer remembers" };
    const iv = offsetInterval(stamp, readAt, recvMonoUs);
    if (iv === undefined) return { ok: false, reason: "hold longer than the round trip" };
    const estimate: OffsetEstimate = {
      offsetUs: (iv.lowUs + iv.highUs) / 2,
      uncertaintyUs: (iv.highUs - iv.lowUs) / 2,
      atMonoUs: recvMonoUs,
    };
    p.estimate = estimate;
    return { ok: true, estimate };
  }

  /**
   * Re-evaluates every peer at monotonic `nowUs`; returns the peers whose
   * exclusion changed (each change once).
   */
  evaluate(nowUs: number): string[] {
    const changed: string[] = [];
    for (const [peer, p] of this.peers) {
      const e = p.estimate;
      let excluded: boolean;
      let reason: string;
      if (e === undefined || nowUs - e.atMonoUs > this.opts.maxSampleAgeUs) {
        excluded = true;
        reason = e === undefined ? "no clock sample yet" : "clock sample too old";
      } else {
        const bound = Math.abs(e.offsetUs) + e.uncertaintyUs;
        // Hysteresis: out above excludeAbove, back in only at or below resumeAtOrBelow.
        excluded = p.excluded ? bound > this.opts.resumeAtOrBelowUs : bound > this.opts.excludeAboveUs;
        reason = `offset ${Math.round(e.offsetUs)} µs ± ${Math.round(e.uncertaintyUs)} µs`;
      }
      p.reason = reason;
      if (excluded !== p.excluded) {
        p.excluded = excluded;
        changed.push(peer);
      }
    }
    return changed;
  }

  view(peer: string): PeerClockView | undefined {
    const p = this.peers.get(peer);
    return p === undefined ? undefined : { estimate: p.estimate, excluded: p.excluded, reason: p.reason };
  }

  excluded(peer: string): boolean {
    return this.peers.get(peer)?.excluded ?? true;
  }
}
