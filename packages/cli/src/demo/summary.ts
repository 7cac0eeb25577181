// The end-of-run verdicts, as text: the global bound (DESIGN §8, checked by the
// sim oracle over the whole run and every sub-interval) and the
// utilization while demand is concentrated in one region (DESIGN G2).
import type { OracleVerdict } from "@geoquota/sim";
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
  /** When the concentrated demand began, and the measured window (after the ramp), client ms. */
  readonly startMs: number;
  readonly fromMs: number;
  readonly toMs: number;
  /** Admitted cost per second over the window. */
  readonly admittedPerSec: number;
  /** admittedPerSec ÷ r. */
  readonly ratio: number;
}

/**
 * Admitted rate of `key` (all regions) while demand is concentrated, as a
 * fraction of r. The first `rampMs` are excluded from the ratio: that is the
 * time the design allows re-weighting to react ("within seconds"). The
 * reaction itself is reported from the polled share (shareReachedAfter): a
 * short rate window is too noisy at r ≈ 17/s to time it (one stalled second
 * moves its admissions into the next).
 */
export function utilization(
  log: RequestLog,
  key: number,
  refillPerSecond: number,
  startMs: number,
  endMs: number,
  rampMs: number,
): Utilization {
  let inWindow = 0;
  const from = Math.min(endMs, startMs + rampMs);
  for (const r of log.records()) {
    if (r.key !== key || r.outcome !== OUTCOME.allowed) continue;
    if (r.answeredMs >= from && r.answeredMs <= endMs) inWindow += r.cost;
  }
  const spanS = (endMs - from) / 1000;
  const perSec = spanS > 0 ? inWindow / spanS : 0;
  return {
    startMs,
    fromMs: from,
    toMs: endMs,
    admittedPerSec: perSec,
    ratio: refillPerSecond > 0 ? perSec / refillPerSecond : 0,
  };
}

export function utilizationLine(
  u: Utilization,
  region: string,
  refillPerSecond: number,
  shareReachedMs?: number | null,
): string {
  const measured = `measured ${((u.toMs - u.fromMs) / 1000).toFixed(1)}s from ${((u.fromMs - u.startMs) / 1000).toFixed(1)}s after the shift`;
  const share =
    shareReachedMs === undefined
      ? ""
      : shareReachedMs === null
        ? `; ${region}'s share never reached 90% of U`
        : `; ${region}'s share reached 90% of U ${(shareReachedMs / 1000).toFixed(1)}s after the shift`;
  return `utilization during shift (demand all in ${region}): admitted ${u.admittedPerSec.toFixed(2)}/s of r = ${refillPerSecond.toFixed(2)}/s = ${(u.ratio * 100).toFixed(1)}% (${measured}${share})`;
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

/**
 * The stream tenant's verdict (exact oracle over the servers' per-frame
 * admissions, bytes). Fixed wording, like the headline:
 * `stream bound held: admitted X B ≤ bound Y B` or
 * `stream bound VIOLATED: admitted X B > bound Y B`.
 */
export function streamBoundLines(v: OracleVerdict, originMs: number): string[] {
  const w = v.worstInterval;
  if (v.ok) {
    const lines = [`stream bound held: admitted ${fmtCost(v.admitted)} B ≤ bound ${fmtBound(v.bound)} B`];
    if (w)
      lines.push(
        `  tightest interval [${secs(w.startMs, originMs)}s, ${secs(w.endMs, originMs)}s]: admitted ${fmtCost(w.admitted)} B ≤ bound ${fmtBound(w.bound)} B (margin ${fmtBound(w.bound - w.admitted)} B; ${v.intervalsChecked} intervals checked)`,
      );
    return lines;
  }
  const adm = w ? w.admitted : v.admitted;
  const bound = w ? w.bound : v.bound;
  const lines = [`stream bound VIOLATED: admitted ${fmtCost(adm)} B > bound ${fmtBound(bound)} B`];
  if (w)
    lines.push(
      `  worst interval [${secs(w.startMs, originMs)}s, ${secs(w.endMs, originMs)}s]: over by ${fmtCost(v.worstExcess)} B (whole run: admitted ${fmtCost(v.admitted)} B, bound ${fmtBound(v.bound)} B)`,
    );
  return lines;
}

export interface StreamRate {
  /** Start of the streaming window and the measured part of it (after the burst), demo ms. */
  readonly startMs: number;
  readonly fromMs: number;
  readonly toMs: number;
  /** Streamed bytes/s, all regions, over [fromMs, toMs]. */
  readonly bytesPerSec: number;
  /** bytesPerSec ÷ r. */
  readonly ratio: number;
  /** Each region's part of the bytes in the window (sums to 1 when any). */
  readonly regionFractions: readonly number[];
}

/**
 * Streamed bytes/s of the tenant (all regions) once its burst C is spent,
 * as a fraction of its byte rate r: deliveries in [startMs + skipMs, endMs].
 */
export function streamRate(
  records: ReadonlyArray<{ region: number; answeredMs: number; bytes: number }>,
  regionCount: number,
  refillPerSecond: number,
  startMs: number,
  endMs: number,
  skipMs: number,
): StreamRate {
  const from = Math.min(endMs, startMs + skipMs);
  const per = new Array<number>(regionCount).fill(0);
  let sum = 0;
  for (const r of records) {
    if (r.answeredMs < from || r.answeredMs > endMs) continue;
    sum += r.bytes;
    per[r.region] = (per[r.region] ?? 0) + r.bytes;
  }
  const spanS = (endMs - from) / 1000;
  const perSec = spanS > 0 ? sum / spanS : 0;
  return {
    startMs,
    fromMs: from,
    toMs: endMs,
    bytesPerSec: perSec,
    ratio: refillPerSecond > 0 ? perSec / refillPerSecond : 0,
    regionFractions: per.map((x) => (sum > 0 ? x / sum : 0)),
  };
}

export function streamRateLine(
  s: StreamRate,
  regionIds: readonly string[],
  refillPerSecond: number,
  multiple: number,
): string {
  const parts = regionIds
    .map((id, i) => `${id} ${((s.regionFractions[i] ?? 0) * 100).toFixed(0)}%`)
    .join(", ");
  return `stream rate: ${Math.round(s.bytesPerSec)} B/s of r = ${Math.round(refillPerSecond)} B/s = ${(s.ratio * 100).toFixed(1)}% while each of ${regionIds.length} clients offered ${multiple}× r (measured ${((s.toMs - s.fromMs) / 1000).toFixed(1)}s from ${((s.fromMs - s.startMs) / 1000).toFixed(1)}s after the start; ${parts})`;
}
