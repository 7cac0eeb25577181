// The daemon's one adapter to its Redis (the DaemonStore port of
// store-port.ts), over the daemon's functions of @geoquota/redis (gossip.ts:
// loans, merges, returns, change feed, sweep): translates between the Redis
// view of a key and the CRDT record gossip ships. Nothing else in the daemon
// runs a script or reads a key (recovery.ts reads the markers through
// @geoquota/redis too).
import type { RegionConfig } from "@geoquota/config";
import { encodeKey, type ReturnedMark } from "@geoquota/crdt";
import type { KeyPolicy } from "@geoquota/core";
import {
  createGossipStore,
  createPrimaryWatcher,
  type RedisClient,
  type SetupDriftChange,
  type SetupSetting,
  type Ticket,
} from "@geoquota/redis";
import { keyStateOf, mergeOf } from "./key-translation.js";
import type { DaemonStore, KeyReading } from "./store-port.js";

export interface RedisDaemonStoreOptions {
  /**
   * Failover detection window (config `redis.primaryCheckMs`): how often the
   * primary's replication id is compared with the recorded one (DESIGN §4).
   * When set, the first check runs before this function returns. Off when absent or 0.
   */
  primaryCheckMs?: number;
  /** Replicas every grant and return must reach before it is shipped (config `redis.replicas`). Default 0. */
  replicas?: number;
  /** WAIT timeout, ms (default 100). */
  waitTimeoutMs?: number;
  /** A periodic primary check failed (Redis unreachable): reported, retried next period. */
  onError?: (where: string, err: unknown) => void;
  /** A checked Redis setting became unsafe, or safe again (DESIGN §4 "Checked continuously"): log it, count it. */
  onDrift?: (change: SetupDriftChange) => void;
}

export async function createRedisDaemonStore(
  redis: RedisClient,
  config: Pick<RegionConfig, "region" | "lease"> & Partial<Pick<RegionConfig, "leased">>,
  options: RedisDaemonStoreOptions = {},
): Promise<DaemonStore & { checkPrimary(): Promise<void>; drifting(): readonly SetupSetting[] }> {
  const region = config.region;
  const epsUs = config.lease.epsilonMs * 1000;
  const store = createGossipStore({
    redis,
    region,
    // Same leased mode as the region's limiter: it is part of every bucket's fingerprint.
    timing: {
      epsilonUs: epsUs,
      loanDurationUs: config.lease.loanDurationMs * 1000,
      leasedMode: config.leased?.enabled === true,
    },
    ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
    ...(options.waitTimeoutMs !== undefined ? { waitTimeoutMs: options.waitTimeoutMs } : {}),
  });
  // Returns already applied on the lender side, so a re-merge does not call Redis again.
  const appliedReturns = new Map<string, number>();
  // The start checks again on every tick: while a setting drifted (an evicting
  // policy, an extra replica) no grant, early return or read-back loan leaves
  // the region (fail closed); eviction also rotates the markers (recovery).
  const watcher = createPrimaryWatcher(redis, {
    ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
    ...(options.onDrift !== undefined ? { onDrift: options.onDrift } : {}),
  });
  const drifted = () => watcher.drifting().length > 0;
  const primary = async () => {
    await watcher.check();
  };
  if (options.primaryCheckMs !== undefined && options.primaryCheckMs > 0) {
    await primary();
    watcher.start(options.primaryCheckMs, (err) => options.onError?.("primary check", err));
  }

  return {
    async redisTimeUs() {
      // Cluster: any node; each shard's host should be NTP-synced like the region's others.
      const [sec, usec] = await redis.time();
      return Number(sec) * 1_000_000 + Number(usec);
    },
    checkPrimary: primary,
    drifting: () => watcher.drifting(),

    async drainDirty(max) {
      const r = await store.drainDirty(max);
      const out: string[] = [];
      for (const { tenant, resource } of r.keys) {
        const k = encodeKey(tenant, resource);
        if (k.ok) out.push(k.value);
      }
      return out;
    },

    async sweepKeys(cursor, count) {
      const r = await store.sweepKeys(cursor, count);
      const keys: string[] = [];
      for (const { tenant, resource } of r.keys) {
        const k = encodeKey(tenant, resource);
        if (k.ok) keys.push(k.value);
      }
      return { cursor: r.cursor, keys };
    },

    async readKey(policy: KeyPolicy): Promise<KeyReading> {
      const v = await store.readKeyState(policy);
      return { ...keyStateOf(region, epsUs, policy.limit.capacity, v), readTicket: v.ticket };
    },

    async mergeRemote(policy, record) {
      const { loans, counterFields } = mergeOf(region, record);
      await store.mergeRemote(policy, loans, counterFields);
      for (const mark of record.returned.values()) {
        if (mark.lender !== region) continue;
        const id = `${policy.tenant}|${policy.resource}|${mark.borrower}`;
        if ((appliedReturns.get(id) ?? -1) >= mark.seq) continue;
        await store.receiveReturn(policy, mark.borrower, mark.seq);
        if (appliedReturns.size > 100_000) appliedReturns.clear();
        appliedReturns.set(id, mark.seq);
      }
    },

    async grantLoan(policy, borrower, units) {
      if (drifted()) return null;
      const r = await store.grantLoan(policy, borrower, units);
      // A grant not yet on a replica is held back: shipping it could let a
      // failover forget a loan the borrower uses (DESIGN §4).
      if (!r.ok || !r.durable) return null;
      return r.loan;
    },

    async returnLoan(policy, lender, _seq): Promise<ReturnedMark | null> {
      if (drifted()) return null;
      const r = await store.returnLoan(policy, lender);
      if (!r.durable || r.seq <= 0) return null;
      return { lender, borrower: region, seq: r.seq };
    },

    async waitDurable(policy, since) {
      // An extra replica is not covered by the wait: nothing read back is certified meanwhile.
      if (drifted()) return false;
      // Only this adapter's own tickets (readKey) are meaningful to its store.
      return store.waitDurable(policy, since as Ticket | undefined);
    },

    async close() {
      watcher.stop();
    },
  };
}
