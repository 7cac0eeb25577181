// Time series derived from the request log (pure): admitted/denied per region
// per bucket, cumulative admitted against the bound line, the live view's
// recent rates. The log is in answer order (records are pushed when the answer
// arrives, on a monotonic clock), which the recent-rate scan relies on.
import { OUTCOME, type RequestLog } from "./request-log.js";

export interface RateSeries {
  readonly bucketMs: number;
  /** Bucket i covers [startMs + i·bucketMs, startMs + (i+1)·bucketMs), by answer time. */
  readonly startMs: number;
  /** [region][bucket] requests per second. */
  readonly admittedPerSec: number[][];
  readonly deniedPerSec: number[][];
}

export function rateSeries(
  log: RequestLog,
  key: number,
  regionCount: number,
  startMs: number,
  endMs: number,
  bucketMs = 1000,
): RateSeries {
  const n = Math.max(1, Math.ceil((endMs - startMs) / bucketMs));
  const admitted = Array.from({ length: regionCount }, () => new Array<number>(n).fill(0));
  const denied = Array.from({ length: regionCount }, () => new Array<number>(n).fill(0));
  const perSec = 1000 / bucketMs;
  for (const r of log.records()) {
    if (r.key !== key) continue;
    const b = Math.floor((r.answeredMs - startMs) / bucketMs);
    if (b < 0 || b >= n) continue;
    const row =
      r.outcome === OUTCOME.allowed
        ? admitted[r.region]
        : r.outcome === OUTCOME.denied
          ? denied[r.region]
          : undefined;
    if (row) row[b] = row[b]! + r.cost * perSec;
  }
  return { bucketMs, startMs, admittedPerSec: admitted, deniedPerSec: denied };
}

export interface CumulativeSeries {
  /** Sample times, ms (answer times, thinned to one per stepMs). */
  readonly tMs: number[];
  readonly admitted: number[];
  /** C + r·(t − first send): the bound for the interval from the first send to t. */
  readonly bound: number[];
}

/** Cumulative admitted cost of one key against the whole-run bound line. */
export function cumulativeSeries(
  log: RequestLog,
  key: number,
  limit: { capacity: number; refillPerSecond: number },
  stepMs = 250,
): CumulativeSeries {
  let first = Number.POSITIVE_INFINITY;
  for (const r of log.records()) if (r.key === key && r.sentMs < first) first = r.sentMs;
  const out: CumulativeSeries = { tMs: [], admitted: [], bound: [] };
  if (!Number.isFinite(first)) return out;
  const boundAt = (t: number) => limit.capacity + (limit.refillPerSecond * (t - first)) / 1000;
  let sum = 0;
  let lastT = Number.NEGATIVE_INFINITY;
  const push = (t: number) => {
    out.tMs.push(t);
    out.admitted.push(sum);
    out.bound.push(boundAt(t));
  };
  push(first);
  for (const r of log.records()) {
    if (r.key !== key || r.outcome !== OUTCOME.allowed) continue;
    sum += r.cost;
    if (r.answeredMs - lastT >= stepMs) {
      push(r.answeredMs);
      lastT = r.answeredMs;
    } else {
      // Keep the thinned curve exact at its points: overwrite the last one.
      out.admitted[out.admitted.length - 1] = sum;
    }
  }
  return out;
}

export interface RecentRates {
  readonly admittedPerSec: number[];
  readonly deniedPerSec: number[];
  readonly errorsPerSec: number[];
}

/** Rates per region over the last `windowMs` of answers (scans back from the end only). */
export function recentRates(
  log: RequestLog,
  key: number,
  regionCount: number,
  nowMs: number,
  windowMs = 1000,
): RecentRates {
  const a = new Array<number>(regionCount).fill(0);
  const d = new Array<number>(regionCount).fill(0);
  const e = new Array<number>(regionCount).fill(0);
  for (let i = log.size - 1; i >= 0; i--) {
    const r = log.at(i);
    if (r.answeredMs < nowMs - windowMs) break;
    if (r.key !== key || r.answeredMs > nowMs) continue;
    const row = r.outcome === OUTCOME.allowed ? a : r.outcome === OUTCOME.denied ? d : e;
    row[r.region] = (row[r.region] ?? 0) + r.cost;
  }
  const scale = 1000 / windowMs;
  return {
    admittedPerSec: a.map((x) => x * scale),
    deniedPerSec: d.map((x) => x * scale),
    errorsPerSec: e.map((x) => x * scale),
  };
}

/** Admitted cost so far and the whole-run bound C + r·(last answer − first send). */
export function admittedSoFar(
  log: RequestLog,
  key: number,
  limit: { capacity: number; refillPerSecond: number },
): { admitted: number; bound: number } {
  let admitted = 0;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const r of log.records()) {
    if (r.key !== key || r.outcome !== OUTCOME.allowed) continue;
    admitted += r.cost;
    if (r.sentMs < first) first = r.sentMs;
    if (r.answeredMs > last) last = r.answeredMs;
  }
  const span = Number.isFinite(first) ? last - first : 0;
  return { admitted, bound: limit.capacity + (limit.refillPerSecond * span) / 1000 };
}
