// The checks of a chaos run besides the global bound (which is the sim's
// exact oracle). Pure functions over what the run recorded.
//
// Σ shares ≤ U from samples taken at slightly different instants. Samples
// are grouped on the client's clock, the one clock every sample shares: a
// region's view was computed at some real instant between the request's
// sending (tMs) and its answer (answeredMs), so a group of one sample per
// region whose requests were all sent and answered within maxSpreadMs holds
// views at most δ = maxSpreadMs apart in real time. Not on the regions'
// Redis TIME (the view's nowUs): that is one host clock only while no Redis
// clock is stepped, and a soak steps them (libfaketime) by more than 2ε, so
// a region's samples would be paired with the others' from up to a second
// earlier or later: seed 26005 "failed" at 1.16 U pairing a region stepped
// 776 ms back with the others' samples from before a policy change.
// Why a group spread δ cannot invent a violation: every share
// change that moves units between regions is ordered by a gossip message or
// by ε. A borrower starts using a loan only after the lender's grant crossed
// a link; it stops (return, or deadline − ε) before the lender frees the
// units (on the return's arrival, or at deadline + ε). With every gossip link
// delayed ≥ WAN_ONE_WAY_MIN_MS (the latency toxic) and 2ε ≫ δ, a borrower
// sample that counts a loan is within δ of a lender sample that still
// reserves it, provided δ < the minimum one-way delay. Recovery only lowers a
// share and ends D + 2ε after the loss, after every old loan lapsed. So a
// group sum above U means some real instant had Σ s_i > U. Groups wider than
// δ (a region slow to answer, or not answering) are skipped and counted.
import type { Admission } from "@geoquota/sim";
import type { LinkSample, QuotaSample } from "./sampler.js";
import { SHARE_UNITS } from "@geoquota/config";

export interface ShareSumVerdict {
  readonly ok: boolean;
  readonly groupsChecked: number;
  readonly groupsSkipped: number;
  /** Groups inside a window where the clock assumption did not hold (after a clock step): not checked. */
  readonly groupsExcluded: number;
  readonly maxSumPpm: number;
  /** Largest share one region held in a checked group: shows re-weighting moved units (not vacuous). */
  readonly maxRegionSharePpm: number;
  /** Gaps between consecutive samples of one region, ms (client clock): 95th percentile and max. */
  readonly sampleGapP95Ms: number;
  readonly maxSampleGapMs: number;
  /** The 5 offending groups with the largest sums. */
  readonly violations: ReadonlyArray<{
    readonly sumPpm: number;
    readonly atMs: number;
    readonly shares: readonly number[];
    readonly nowUs: readonly number[];
    /** Per region: the middle of its request's client-clock interval, ms, and whether it was recovering. */
    readonly atMsByRegion: readonly number[];
    readonly recovering: readonly boolean[];
    /** Per region: its view's loans (sampler.ts `loans`). */
    readonly loans?: readonly (string | undefined)[];
  }>;
}

/** The middle of the client-clock interval the view was computed in, ms. */
const mid = (s: QuotaSample) => (s.tMs + s.answeredMs) / 2;

function nearest(sorted: readonly QuotaSample[], ms: number): QuotaSample | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (mid(sorted[m]!) < ms) lo = m + 1;
    else hi = m;
  }
  const a = sorted[lo - 1];
  const b = sorted[lo];
  if (!a) return b;
  if (!b) return a;
  return ms - mid(a) <= mid(b) - ms ? a : b;
}

/**
 * Where Σ shares ≤ U is not claimed: after a Redis clock steps by more than
 * 2ε (§1.2 assumes the clocks within 2ε). A lender whose clock jumps ahead by
 * s frees the reservation of every loan due within s at deadline + ε on its
 * clock, s − 2ε before the borrower stops using it at deadline − ε on its own,
 * and no detector can act before the free; a borrower whose clock jumps back
 * uses its loans s late. Soak seed 2630: eu-west stepped +948 ms at 842.64 s,
 * Σ 1.027 U at 842.89 s. Every loan alive at a step (or granted before the
 * step is detected) ends within D + |s| + detection after it, so each step,
 * and each step back, opens a window that long.
 */
export interface UnclaimedWindow {
  readonly fromMs: number;
  readonly toMs: number;
}

export function checkShareSum(
  samples: readonly QuotaSample[],
  regions: number,
  options: { maxSpreadMs: number; units?: number; unclaimed?: readonly UnclaimedWindow[] },
): ShareSumVerdict {
  const unclaimed = options.unclaimed ?? [];
  const units = options.units ?? SHARE_UNITS;
  const by: QuotaSample[][] = Array.from({ length: regions }, () => []);
  for (const s of samples) by[s.region]?.push(s);
  const gaps: number[] = [];
  for (const list of by) {
    const byTime = [...list].sort((a, b) => a.tMs - b.tMs);
    for (let i = 1; i < byTime.length; i++) gaps.push(byTime[i]!.tMs - byTime[i - 1]!.tMs);
    list.sort((a, b) => mid(a) - mid(b));
  }
  gaps.sort((a, b) => a - b);
  let maxRegion = 0;
  let checked = 0;
  let skipped = 0;
  let excluded = 0;
  let maxSum = 0;
  const violations: Array<ShareSumVerdict["violations"][number]> = [];
  // Every sample anchors one group: the nearest sample of each other region.
  for (const anchor of samples) {
    const at = mid(anchor);
    if (unclaimed.some((w) => at >= w.fromMs && at <= w.toMs)) {
      excluded++;
      continue;
    }
    const group: QuotaSample[] = [];
    for (let r = 0; r < regions; r++) {
      const s = r === anchor.region ? anchor : nearest(by[r]!, mid(anchor));
      if (s) group.push(s);
    }
    // Every view of the group lies in [first sent, last answered] on the client's clock.
    const span = Math.max(...group.map((s) => s.answeredMs)) - Math.min(...group.map((s) => s.tMs));
    if (group.length < regions || span > options.maxSpreadMs) {
      skipped++;
      continue;
    }
    checked++;
    const sum = group.reduce((a, s) => a + s.sharePpm, 0);
    for (const s of group) if (s.sharePpm > maxRegion) maxRegion = s.sharePpm;
    if (sum > maxSum) maxSum = sum;
    if (sum > units)
      violations.push({
        sumPpm: sum,
        atMs: anchor.tMs,
        shares: group.map((s) => s.sharePpm),
        nowUs: group.map((s) => s.nowUs),
        atMsByRegion: group.map(mid),
        recovering: group.map((s) => s.recovering),
        loans: group.map((s) => s.loans),
      });
  }
  return {
    ok: violations.length === 0,
    groupsChecked: checked,
    groupsSkipped: skipped,
    groupsExcluded: excluded,
    maxSumPpm: maxSum,
    maxRegionSharePpm: maxRegion,
    sampleGapP95Ms: gaps[Math.floor(gaps.length * 0.95)] ?? 0,
    maxSampleGapMs: gaps[gaps.length - 1] ?? 0,
    violations: violations.sort((a, b) => b.sumPpm - a.sumPpm).slice(0, 5),
  };
}

/** A region's Redis forgot its state at `atMs` (client clock): FLUSHALL, or SIGKILLed and restarted empty. */
export interface StateLoss {
  readonly region: number;
  readonly atMs: number;
}

/**
 * How long after `eventMs` every region knew every counter value that any
 * region's last view by `eventMs` held, unless a loss of that region's state
 * came after the view was asked for: what such a view held and the region
 * had not yet gossiped is gone for good, by design (the region must still
 * re-learn everything the others knew). A loss counts from its injection, not
 * from the heal: a Redis SIGKILLed at 141 s and restarted empty at 151 s has
 * no view between the two, so its last view is from before the kill, and
 * its unshipped counters must not be the target of the heal at 151 s.
 * Losses more than `lossesAfterMs` after the event are ignored (a long run:
 * the region's view at the event was gossiped by then). A region's view
 * counts only if it was requested after the event. Null: not within the samples.
 */
export function convergenceAfter(
  samples: readonly QuotaSample[],
  regions: number,
  eventMs: number,
  losses: readonly StateLoss[] = [],
  lossesAfterMs = Number.POSITIVE_INFINITY,
): number | null {
  const sorted = [...samples].sort((a, b) => a.answeredMs - b.answeredMs);
  const lastBefore: Array<QuotaSample | undefined> = [];
  for (const s of sorted) if (s.answeredMs <= eventMs) lastBefore[s.region] = s;
  const lostSince = (s: QuotaSample) =>
    losses.some((l) => l.region === s.region && l.atMs >= s.tMs && l.atMs <= eventMs + lossesAfterMs);
  const target = new Map<string, number>();
  for (const s of lastBefore) {
    if (!s || lostSince(s)) continue;
    for (const [k, v] of s.counters) if (v > (target.get(k) ?? Number.NEGATIVE_INFINITY)) target.set(k, v);
  }
  const latest: Array<QuotaSample | undefined> = Array.from({ length: regions }, () => undefined);
  const covers = (s: QuotaSample | undefined) => {
    if (!s) return false;
    for (const [k, v] of target) if ((s.counters.get(k) ?? Number.NEGATIVE_INFINITY) < v) return false;
    return true;
  };
  for (const s of sorted) {
    if (s.tMs < eventMs) continue;
    latest[s.region] = s;
    if (latest.every(covers)) return s.answeredMs - eventMs;
  }
  return null;
}

/**
 * How late counters converged, counted from when the daemons were connected
 * again (Redis ready, every link up): re-dialing after a heal is the
 * transport's and ioredis's backoff, not gossip rounds. Converging before
 * every link was up (counters relayed over the links that were) is on time.
 */
export function convergenceLateness(convergenceMs: number, linksUpMs: number | null): number {
  return Math.max(0, convergenceMs - (linksUpMs ?? convergenceMs));
}

/**
 * Where the convergence clock of a heal starts. Another fault active at some
 * point between this heal and the convergence (say a daemon killed right
 * after a partition healed) holds gossip back until it heals in turn, so the
 * clock starts at the last such heal.
 */
export function quietFrom(
  healedMs: number,
  convergedAtMs: number,
  others: ReadonlyArray<{ readonly injectedMs: number; readonly healedMs: number }>,
): number {
  let from = healedMs;
  for (const g of others)
    if (g.injectedMs <= convergedAtMs && g.healedMs > healedMs) from = Math.max(from, g.healedMs);
  return from;
}

/**
 * When, after `eventMs`, every daemon first reported all its links up (each
 * by a status requested after the event). Null: not within the samples.
 */
export function linksUpAfter(links: readonly LinkSample[], regions: number, eventMs: number): number | null {
  const sorted = [...links].sort((a, b) => a.answeredMs - b.answeredMs);
  const up: boolean[] = Array.from({ length: regions }, () => false);
  for (const s of sorted) {
    if (s.tMs < eventMs) continue;
    up[s.region] = s.allUp;
    if (up.every(Boolean)) return s.answeredMs - eventMs;
  }
  return null;
}

/** One answered check as the chaos sender saw it. */
export interface CheckRecord {
  readonly region: number;
  readonly sentMs: number;
  readonly answeredMs: number;
  readonly allowed: boolean;
  readonly degraded: boolean;
  readonly cost: number;
}

export interface FailClosedVerdict {
  readonly ok: boolean;
  readonly region: string;
  /** Cost admitted by the region for requests sent while its Redis was away. */
  readonly admittedDuringCut: number;
  /** What it may admit then: tokens it could hold in in-process leases at the cut. */
  readonly leasedMax: number;
  readonly answeredDuringCut: number;
  readonly degradedDuringCut: number;
  /** Answers that should have been degraded and were not (see below). */
  readonly notDegraded: number;
}

/**
 * While region `region`'s Redis is cut ([cutMs, healMs] on the client clock):
 * it admits no more than the tokens it held in leases; every denial is
 * degraded (no store could have decided it); and every answer to a request
 * sent ≥ `breakerMs` after the cut is degraded (the breaker must be open or
 * half-open by then, so even lease admissions say so).
 */
export function checkFailClosed(
  records: readonly CheckRecord[],
  o: {
    region: number;
    regionId: string;
    cutMs: number;
    healMs: number;
    leasedMax: number;
    breakerMs: number;
  },
): FailClosedVerdict {
  let admitted = 0;
  let answered = 0;
  let degraded = 0;
  let notDegraded = 0;
  for (const r of records) {
    if (r.region !== o.region || r.sentMs < o.cutMs || r.answeredMs > o.healMs) continue;
    answered++;
    if (r.degraded) degraded++;
    if (r.allowed) admitted += r.cost;
    const mustBeDegraded = !r.allowed || r.sentMs >= o.cutMs + o.breakerMs;
    if (mustBeDegraded && !r.degraded) notDegraded++;
  }
  return {
    ok: admitted <= o.leasedMax && notDegraded === 0,
    region: o.regionId,
    admittedDuringCut: admitted,
    leasedMax: o.leasedMax,
    answeredDuringCut: answered,
    degradedDuringCut: degraded,
    notDegraded,
  };
}

/** Admitted cost per second over [fromMs, toMs] (by answer time) as a fraction of r. */
export function rateOfR(admissions: readonly Admission[], r: number, fromMs: number, toMs: number): number {
  if (!(toMs > fromMs) || !(r > 0)) return 0;
  let sum = 0;
  for (const a of admissions) if (a.answeredMs >= fromMs && a.answeredMs <= toMs) sum += a.cost;
  return sum / ((r * (toMs - fromMs)) / 1000);
}

/** Check latency (answered − sent) percentiles, ms, of the records with sentMs in [fromMs, toMs). */
export function latencyPercentiles(
  records: readonly CheckRecord[],
  windows: ReadonlyArray<readonly [number, number]>,
): { count: number; p50Ms: number; p99Ms: number } {
  const l: number[] = [];
  for (const r of records)
    if (windows.some(([a, b]) => r.sentMs >= a && r.sentMs < b)) l.push(r.answeredMs - r.sentMs);
  l.sort((a, b) => a - b);
  const at = (q: number) => l[Math.min(l.length - 1, Math.floor(l.length * q))] ?? 0;
  return { count: l.length, p50Ms: at(0.5), p99Ms: at(0.99) };
}

/**
 * The windows after each clock step and step back where Σ shares ≤ U is not
 * claimed (checks.ts `UnclaimedWindow`): a loan alive at the step, or granted
 * before the detector saw it (two rounds), ends within D after that, and its
 * overlap lasts at most |step| − 2ε; ε of margin on top.
 */
export function clockStepWindows(
  faults: ReadonlyArray<{
    readonly fault: { readonly clockStepMs?: number };
    injectedMs: number;
    healedMs: number;
  }>,
  config: {
    readonly lease: { readonly epsilonMs: number; readonly loanDurationMs: number };
    readonly gossip: { readonly round: { readonly maxMs: number } };
  },
): UnclaimedWindow[] {
  const out: UnclaimedWindow[] = [];
  for (const f of faults) {
    const step = f.fault.clockStepMs;
    if (step === undefined) continue;
    const span =
      config.lease.loanDurationMs + Math.abs(step) + 2 * config.gossip.round.maxMs + config.lease.epsilonMs;
    for (const at of [f.injectedMs, f.healedMs])
      if (Number.isFinite(at)) out.push({ fromMs: at, toMs: at + span });
  }
  return out;
}
