// The end-of-run verdicts, as text: the global bound (DESIGN §8, checked by the
// testkit oracle over the whole run and every sub-interval) and the
// utilization while demand is concentrated in one region (DESIGN G2).
import type { OracleVerdict } from "@geoquota/testkit";
import { OUTCOME, type RequestLog } from "./request-log.js";

/** Bounds are printed rounded down: a printed "X ≤ Y" is then true whenever the exact check held. */
export function fmtBound(y: number): string {
  return (Math.floor(y * 100) / 100).toFixed(2);
}

export function fmtCost(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

function secs(ms: number, originMs: number): string {
  return ((ms - originMs) / 1000).toFixed(2);
}

/**
 * The summary lines for one key's verdict. The first line of the main key is
 * the product's headline and its wording is fixed:
 * `global bound held: admitted X ≤ bound Y` or `global bound VIOLATED: admitted X > bound Y`.
 */
export function boundLines(v: OracleVerdict, originMs: number, label?: string): string[] {
  const prefix = label ? `${label}: ` : "";
  const w = v.worstInterval;
  // A side key that held gets one short line, so the headline stays the only "global bound held".
  if (v.ok && label)
    return [`${label}: held too, admitted ${fmtCost(v.admitted)} ≤ bound ${fmtBound(v.bound)}`];
  if (v.ok) {
    const lines = [
      `${prefix}global bound held: admitted ${fmtCost(v.admitted)} ≤ bound ${fmtBound(v.bound)}`,
    ];
    if (w)
      lines.push(
        `  tightest interval [${secs(w.startMs, originMs)}s, ${secs(w.endMs, originMs)}s]: admitted ${fmtCost(w.admitted)} ≤ bound ${fmtBound(w.bound)} (margin ${fmtBound(w.bound - w.admitted)}; ${v.intervalsChecked} intervals checked)`,
      );
    return lines;
  }
  // Violated: report the worst interval (it may be the whole run or a sub-interval).
  const adm = w ? w.admitted : v.admitted;
  const bound = w ? w.bound : v.bound;
  const lines = [`${prefix}global bound VIOLATED: admitted ${fmtCost(adm)} > bound ${fmtBound(bound)}`];
  if (w)
    lines.push(
      `  worst interval [${secs(w.startMs, originMs)}s, ${secs(w.endMs, originMs)}s]: over by ${fmtCost(v.worstExcess)} (whole run: admitted ${fmtCost(v.admitted)}, bound ${fmtBound(v.bound)})`,
    );
  return lines;
}

export interface Utilization {
  /** The measured window (after the ramp), ms on the client clock. */
  readonly fromMs: number;
  readonly toMs: number;
  /** Admitted cost per second over the window. */
  readonly admittedPerSec: number;
  /** admittedPerSec ÷ r. */
  readonly ratio: number;
  /** Time from the window start after which the trailing 3 s rate stayed ≥ 90% of r; null if it never settled. */
  readonly settledAfterMs: number | null;
}

/**
 * Admitted rate of `key` (all regions) while demand is concentrated, as a
 * fraction of r. The first `rampMs` are excluded from the ratio: that is the
 * time the design allows re-weighting to react ("within seconds").
 */
export function utilization(
  log: RequestLog,
  key: number,
  refillPerSecond: number,
  startMs: number,
  endMs: number,
  rampMs: number,
): Utilization {
  const times: number[] = [];
  let inWindow = 0;
  const from = Math.min(endMs, startMs + rampMs);
  for (const r of log.records()) {
    if (r.key !== key || r.outcome !== OUTCOME.allowed) continue;
    if (r.answeredMs >= startMs && r.answeredMs <= endMs) times.push(r.answeredMs);
    if (r.answeredMs >= from && r.answeredMs <= endMs) inWindow += r.cost;
  }
  const spanS = (endMs - from) / 1000;
  const perSec = spanS > 0 ? inWindow / spanS : 0;
  // Settling time: the start of the first trailing 3 s window of the final run
  // of windows at ≥ 90% of r (0: from the shift on). 3 s, because at r ≈ 17/s
  // a 1 s count is too coarse.
  const windowMs = 3000;
  const stepMs = 250;
  let settled: number | null = 0;
  let lo = 0;
  let hi = 0;
  for (let t = startMs + windowMs; t <= endMs; t += stepMs) {
    while (hi < times.length && times[hi]! <= t) hi++;
    while (lo < hi && times[lo]! < t - windowMs) lo++;
    const rate = ((hi - lo) * 1000) / windowMs;
    if (rate < 0.9 * refillPerSecond) settled = null;
    else if (settled === null) settled = t - windowMs - startMs; // the start of the first good window
  }
  if (endMs - startMs < windowMs) settled = null;
  return {
    fromMs: from,
    toMs: endMs,
    admittedPerSec: perSec,
    ratio: refillPerSecond > 0 ? perSec / refillPerSecond : 0,
    settledAfterMs: settled,
  };
}

export function utilizationLine(
  u: Utilization,
  region: string,
  refillPerSecond: number,
  shareReachedMs?: number | null,
): string {
  const settled =
    u.settledAfterMs === null
      ? "never sustained ≥ 90% of r"
      : `sustained ≥ 90% of r from ${(u.settledAfterMs / 1000).toFixed(1)}s after the shift`;
  const share =
    shareReachedMs === undefined
      ? ""
      : shareReachedMs === null
        ? `; ${region}'s share never reached 90%`
        : `; ${region}'s share reached 90% ${(shareReachedMs / 1000).toFixed(1)}s after the shift`;
  return `utilization during shift (demand all in ${region}): admitted ${u.admittedPerSec.toFixed(2)}/s of r = ${refillPerSecond.toFixed(2)}/s = ${(u.ratio * 100).toFixed(1)}% (${settled}${share})`;
}

/** How long after `startMs` the region's polled share first reached 90% of U; null if never. */
export function shareReachedAfter(
  samples: readonly { tMs: number; regions: Readonly<Record<string, { sharePpm: number } | null>> }[],
  region: string,
  startMs: number,
  endMs: number,
): number | null {
  for (const s of samples) {
    if (s.tMs < startMs || s.tMs > endMs) continue;
    const v = s.regions[region];
    if (v && v.sharePpm >= 900_000) return s.tMs - startMs;
  }
  return null;
}
