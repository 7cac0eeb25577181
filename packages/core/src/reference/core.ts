// The incarnation marker `gq:{s<k>}:inc` = `<id>:<bornUs>` (DESIGN §4; one per
// shard k of the key schema, the model holds the one of its key's shard). A region that
// finds it missing starts a new incarnation born now and is in recovery until
// born + D + 2ε: it may have lent its share away and forgotten the loans.
import { replicaIdOf } from "../ids.js";
import type { Timing } from "../types.js";

export interface Incarnation {
  readonly id: string;
  readonly bornUs: number;
}

export function formatMarker(inc: Incarnation): string {
  return `${inc.id}:${inc.bornUs}`;
}

export function parseMarker(marker: string): Incarnation {
  const at = marker.indexOf(":");
  if (at <= 0) throw new Error(`malformed incarnation marker: ${marker}`);
  return { id: marker.slice(0, at), bornUs: Number(marker.slice(at + 1)) };
}

/** The marker a script writes when it finds none: a new incarnation born now. */
export function newIncarnation(nowUs: number): string {
  return formatMarker({ id: String(nowUs), bornUs: nowUs });
}

/**
 * The marker of a region whose Redis provably never held geoquota state (a
 * cluster started from empty servers): born at 0, so no recovery period and
 * buckets start full. Safe only then: the region has admitted nothing and lent
 * nothing, so full buckets (Σ capacity_i = C) are exactly what G1 allows at the
 * start. After any state loss the region may have emptied its buckets or lent
 * its share, and must use `newIncarnation` instead.
 */
export function freshIncarnation(nowUs: number): string {
  return formatMarker({ id: String(nowUs), bornUs: 0 });
}

/** End of recovery: born + D + 2ε (loans granted before the loss have lapsed on both sides). */
export function recoveryEndUs(bornUs: number, timing: Timing): number {
  return bornUs + timing.loanDurationUs + 2 * timing.epsilonUs;
}

/**
 * End of the recovery lease hold: with leased mode on, clients may still hold
 * leases granted before the state loss (lease durations ≤ D), so the share is
 * 0 until born + D + ε, then floor until the recovery end (DESIGN §4).
 * Without it the hold ends at birth (no effect).
 */
export function leaseHoldEndUs(bornUs: number, timing: Timing, hold: boolean): number {
  return hold ? bornUs + timing.loanDurationUs + timing.epsilonUs : bornUs;
}

/** The replica id of this region's own CRDT counter entries: `<region>.<incarnation id>`. */
export function replicaId(region: string, marker: string): string {
  return replicaIdOf(region, parseMarker(marker).id);
}
