// What the daemon needs from its region's Redis. The Redis implementation
// (an adapter over the limiter's GossipStore scripts) lives in redis-port.ts;
// tests may use another implementation.
import type { KeyPolicy } from "@geoquota/core";
import type { KeyRecord, Loan, ReturnedMark } from "@geoquota/crdt";
import type { RegionQuota, ShareBook } from "../policy/index.js";

/** Resolves a key's policy for this region and the quotas of all regions. */
export interface PolicyResolver {
  resolve(tenant: string, resource: string): { policy: KeyPolicy; regions: readonly RegionQuota[] };
}

/**
 * One array per distinct set of region quotas: a resolver's cache holds an entry per key, and a
 * million keys under a few policies then share a few arrays instead of holding ten objects each.
 */
export function quotaInterner(): (quotas: readonly RegionQuota[]) => readonly RegionQuota[] {
  const seen = new Map<string, readonly RegionQuota[]>();
  return (quotas) => {
    const k = quotas.map((q) => `${q.region}:${q.baseShare}:${q.floorShare}`).join("|");
    const hit = seen.get(k);
    if (hit !== undefined) return hit;
    if (seen.size >= 10_000) seen.clear();
    seen.set(k, quotas);
    return quotas;
  };
}

/** One key as a script read it from this region's Redis (atomically): its share book and record. */
export interface KeyReading extends ShareBook {
  /**
   * The key's CRDT record as this region's Redis holds it: every counter entry
   * it knows, the loans this region granted (its owner-written registers) and
   * the returns it made as a borrower.
   */
  readonly record: KeyRecord;
  /**
   * The store's opaque note of where and when the read went out (connection
   * and socket generation): `waitDurable(policy, readTicket)` certifies the
   * records of this read only if no reconnect happened since (DESIGN §4
   * "Durability certificates"). Absent: the store has no such notion.
   */
  readonly readTicket?: unknown;
}

export interface DaemonStore {
  /** Up to `max` keys (`tenant|resource`) changed since the last drain. */
  drainDirty(max: number): Promise<string[]>;
  /** A slice of all keys, for the slow anti-entropy sweep (cursor "0" starts and ends a pass). */
  sweepKeys(cursor: string, count: number): Promise<{ cursor: string; keys: string[] }>;
  readKey(policy: KeyPolicy): Promise<KeyReading>;
  /**
   * Merges what peers told us: counter entries by max, loans granted to this
   * region (settling the bucket first), returns of loans this region granted.
   */
  mergeRemote(policy: KeyPolicy, record: KeyRecord): Promise<void>;
  /**
   * Grants or renews a loan of `units` to `borrower`; null when refused (floor,
   * recovery, headroom) or not durable (the grant stays in the store; it is
   * shipped once `waitDurable` covers it).
   */
  grantLoan(policy: KeyPolicy, borrower: string, units: number): Promise<Loan | null>;
  /** Returns lender's loan `seq` early: stops using it, durably, before the lender is told (null: refused or not durable). */
  returnLoan(policy: KeyPolicy, lender: string, seq: number): Promise<ReturnedMark | null>;
  /**
   * True once every write the store accepted for this key before `since` (a
   * `KeyReading.readTicket`; default: the call) is durable: a certificate on the
   * connection the read went out on, with no reconnect since (Redis WAIT
   * acked by every configured and connected replica). Loans and returns read
   * back by `readKey` leave the region only after this succeeded (DESIGN §4).
   */
  waitDurable(policy: KeyPolicy, since?: unknown): Promise<boolean>;
  /**
   * Redis TIME now, µs: the clock every loan deadline of this region is in,
   * sent to peers for their offset estimates (DESIGN §1.2). Required when the
   * daemon's clock check is on.
   */
  redisTimeUs?(): Promise<number>;
  close(): Promise<void>;
}
