// What a refund of a rate-algorithm admission may give back (DESIGN §7: a
// refund erases the admission it names). Erasing an admission of cost c made
// at t_a leaves the bucket with min(c, smallest headroom C_i − tokens seen at
// any instant in [t_a, now]) more tokens: once the bucket without it would
// have reached its capacity, the cap absorbed that refill.
//
// The state (`P:b` field `rf`) is a short list of suffix minima, oldest first:
// entries (t_j, m_j), t and m increasing; an admission at t_a ≤ t_j (and >
// t_{j−1}) has seen a headroom of at most m_j/1000 tokens since. Observations:
// just before each event (at ts − 1, so the event's own admission is not
// covered), at the end of each settled piece of the share schedule (headroom
// shrinks within a piece and may jump up at its end) and after an event that
// lowered it (a refund, a capacity clamp). Every approximation lowers the
// credit: m is floored to milli-tokens, a merge keeps the smaller headroom over
// the longer range, a rebuilt bucket starts with a barrier (headroom 0 before
// now). Mirrors lua/lib/refunds.lua operation for operation; stored flat,
// absolute µs and milli-tokens: [t1, m1, t2, m2, …].

/** At most this many entries; past it the two oldest merge into (t2, m1). */
export const REFUND_FLOOR_ENTRIES = 4;

/** Headroom in whole milli-tokens, never above the headroom itself. */
export function refundMilli(headroom: number): number {
  if (!(headroom > 0)) return 0;
  let q = Math.floor(headroom * 1000);
  if (q / 1000 > headroom) q -= 1;
  return q;
}

/** Notes headroom `h` at instant `t`: the entries it undercuts merge into one ending at the latest of them. */
export function refundNote(list: number[], t: number, h: number): void {
  const q = refundMilli(h);
  let n = list.length;
  // Dominated: an entry as late with no more headroom already covers every admission up to t.
  if (n > 0 && (list[n - 2] as number) >= t && (list[n - 1] as number) <= q) return;
  let at = t;
  while (n > 0 && (list[n - 1] as number) >= q) {
    if ((list[n - 2] as number) > at) at = list[n - 2] as number;
    n -= 2;
  }
  list.length = n;
  list.push(at, q);
  if (list.length > 2 * REFUND_FLOOR_ENTRIES) {
    list[3] = list[1] as number;
    list.splice(0, 2);
  }
}

/** After an event: noted only when it lowered the headroom below the latest entry. */
export function refundNoteLow(list: number[], t: number, h: number): void {
  const n = list.length;
  if (n === 0 || refundMilli(h) < (list[n - 1] as number)) refundNote(list, t, h);
}

/** The most a refund of an admission made at `admittedUs` may give back (∞: nothing observed since). */
export function refundFloor(list: readonly number[], admittedUs: number): number {
  for (let i = 0; i < list.length; i += 2) {
    if ((list[i] as number) >= admittedUs) return (list[i + 1] as number) / 1000;
  }
  return Number.POSITIVE_INFINITY;
}

/** A bucket rebuilt at `nowUs`: nothing admitted before is kept out of it (at now itself after a policy restart). */
export function refundBarrier(nowUs: number, restarted: boolean): number[] {
  return [restarted ? nowUs : nowUs - 1, 0];
}

/**
 * After erasing `cost` admitted at `admittedUs`: the bucket without it saw, at
 * every instant since, a headroom up to `cost` smaller (exactly `cost` smaller
 * when the refund came back in full), never below 0; entries then no smaller
 * than a later one merge into it. Without this a second refund of an admission
 * made before the bucket-without-the-first was full would be over-credited.
 */
export function refundErase(list: readonly number[], admittedUs: number, cost: number): number[] {
  const d = Math.ceil(cost * 1000);
  const l = [...list];
  for (let i = 0; i < l.length; i += 2) {
    if ((l[i] as number) >= admittedUs) {
      const m = (l[i + 1] as number) - d;
      l[i + 1] = Math.max(m, 0);
    }
  }
  const keep: number[] = [];
  let lo = Number.POSITIVE_INFINITY;
  for (let i = l.length - 2; i >= 0; i -= 2) {
    if ((l[i + 1] as number) < lo) {
      lo = l[i + 1] as number;
      keep.push(i);
    }
  }
  const out: number[] = [];
  for (let j = keep.length - 1; j >= 0; j--) {
    const i = keep[j] as number;
    out.push(l[i] as number, l[i + 1] as number);
  }
  return out;
}
