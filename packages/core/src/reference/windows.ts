// The window algorithms keep the static base slice L = C·b/U per window and
// never take loans (docs/internals.md). After a state loss the region forgot
// what it admitted, so every window overlapping the recovery period
// [born, born + D + 2ε) is treated as exhausted.
import { ensureMarker } from "./bucket.js";
import { parseMarker, recoveryEndUs } from "./core.js";
import type { KeyState, LogEntry, RegionState, WindowHash } from "./state.js";
import { type KeyLimit, SHARE_UNITS, type Timing } from "../types.js";

export interface WindowOutcome {
  readonly allowed: boolean;
  /** Cost still admissible now in this region (≥ 0). */
  readonly remaining: number;
  /** The static slice per window. */
  readonly limit: number;
  /** µs until the constraint relaxes: next window start (fixed/sliding) or oldest entry's exit (log). */
  readonly resetUs: number;
  readonly recovering: boolean;
  readonly commit: () => void;
}

function windowUs(limit: KeyLimit): number {
  return (limit.windowMs ?? 1000) * 1000;
}

export function sliceLimit(limit: KeyLimit): number {
  return (limit.capacity * limit.baseShare) / SHARE_UNITS;
}

/** Whether window [start, start + W) overlaps the recovery period [born, recEnd). */
function overlapsRecovery(startUs: number, wUs: number, bornUs: number, recEndUs: number): boolean {
  return startUs < recEndUs && startUs + wUs > bornUs;
}

export function decideWindow(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  timing: Timing,
  cost: number,
  nowUs: number,
): WindowOutcome {
  const marker = ensureMarker(region, nowUs);
  const born = parseMarker(marker).bornUs;
  const recEnd = recoveryEndUs(born, timing);
  const recovering = nowUs < recEnd;
  const W = windowUs(limit);
  const L = sliceLimit(limit);
  if (limit.algorithm === "sliding_log") return decideLog(key, marker, L, W, recEnd, recovering, cost, nowUs);
  const k = Math.floor(nowUs / W);
  const st: WindowHash | undefined =
    key.window !== undefined && key.window.inc === marker ? key.window : undefined;
  let cur = 0;
  let prev = 0;
  if (st !== undefined) {
    if (st.window === k) {
      cur = st.count;
      prev = st.previous;
    } else if (st.window === k - 1) {
      prev = st.count;
    }
  }
  const resetUs = (k + 1) * W - nowUs;
  if (overlapsRecovery(k * W, W, born, recEnd)) {
    return { allowed: false, remaining: 0, limit: L, resetUs, recovering, commit: () => {} };
  }
  let used = cur;
  if (limit.algorithm === "sliding_window") {
    if (overlapsRecovery((k - 1) * W, W, born, recEnd)) prev = L;
    used = (prev * (W - (nowUs - k * W))) / W + cur;
  }
  const allowed = used + cost <= L;
  const after = allowed ? used + cost : used;
  const remaining = after < L ? L - after : 0;
  const commit = () => {
    key.window = { inc: marker, window: k, count: cur + cost, previous: prev };
  };
  return { allowed, remaining, limit: L, resetUs, recovering, commit };
}

function byScoreThenMember(a: LogEntry, b: LogEntry): number {
  if (a.scoreUs !== b.scoreUs) return a.scoreUs - b.scoreUs;
  return a.member < b.member ? -1 : a.member > b.member ? 1 : 0;
}

export function logEntryCost(e: LogEntry): number {
  return Number(e.member.slice(e.member.indexOf(":") + 1));
}

/** Drops entries of another incarnation and those out of the window (score ≤ now − W). */
function liveLog(key: KeyState, marker: string, W: number, nowUs: number): LogEntry[] {
  if (key.logInc !== marker) return [];
  return key.log.filter((e) => e.scoreUs > nowUs - W).sort(byScoreThenMember);
}

function decideLog(
  key: KeyState,
  marker: string,
  L: number,
  W: number,
  recEnd: number,
  recovering: boolean,
  cost: number,
  nowUs: number,
): WindowOutcome {
  const entries = liveLog(key, marker, W, nowUs);
  let sum = 0;
  for (const e of entries) sum += logEntryCost(e);
  const first = entries[0];
  const resetUs = first !== undefined ? first.scoreUs + W - nowUs : 0;
  // The window (now − W, now] overlaps the recovery period until recEnd + W.
  if (nowUs < recEnd + W) {
    return {
      allowed: false,
      remaining: 0,
      limit: L,
      resetUs: recEnd + W - nowUs,
      recovering,
      commit: () => {},
    };
  }
  const allowed = sum + cost <= L;
  const after = allowed ? sum + cost : sum;
  const commit = () => {
    key.logSeq += 1;
    key.log = [...entries, { scoreUs: nowUs, member: `${key.logSeq}:${cost}` }];
    key.logInc = marker;
  };
  return { allowed, remaining: after < L ? L - after : 0, limit: L, resetUs, recovering, commit };
}

/**
 * Refund in a window (DESIGN §7: it erases the admission made at
 * `admittedUs`): the count of the admission's own window drops (never below
 * 0); a receipt of an earlier window changes nothing (its admission no longer
 * counts in the current one). The log loses cost from the entries made at that
 * instant, none once it left the window.
 */
export function refundWindow(
  region: RegionState,
  key: KeyState,
  limit: KeyLimit,
  cost: number,
  admittedUs: number,
  nowUs: number,
): void {
  const marker = ensureMarker(region, nowUs);
  const W = windowUs(limit);
  if (limit.algorithm === "sliding_log") {
    // As lua/lib/windows.lua refund_window: a log of another incarnation is left as it
    // is, and entries already out of the window stay until the next admission
    // trims them (the Lua touches only the entries it reads).
    if (admittedUs <= nowUs - W || key.logInc !== marker) return;
    let left = cost;
    const kept: LogEntry[] = key.log.filter((e) => e.scoreUs !== admittedUs);
    for (const e of key.log.filter((x) => x.scoreUs === admittedUs).sort(byScoreThenMember)) {
      const c = logEntryCost(e);
      if (left <= 0) kept.push(e);
      else if (c <= left) left -= c;
      else {
        key.logSeq += 1;
        kept.push({ scoreUs: e.scoreUs, member: `${key.logSeq}:${c - left}` });
        left = 0;
      }
    }
    key.log = kept.sort(byScoreThenMember);
    return;
  }
  const k = Math.floor(nowUs / W);
  if (Math.floor(admittedUs / W) !== k) return;
  const st = key.window;
  if (st === undefined || st.inc !== marker || st.window !== k) return;
  st.count = st.count > cost ? st.count - cost : 0;
}
