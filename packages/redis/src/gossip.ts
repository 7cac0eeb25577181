// The daemon's side of the store: loans, merges, returns, the change feed and
// the anti-entropy sweep. Loan times all come from this region's Redis TIME
// (trap 7). The gossip daemon's one adapter (packages/gossip
// src/daemon/redis-port.ts) translates these into its CRDT records; nothing
// else in the daemon touches the keys.
import type { Redis } from "ioredis";
import type { KeyPolicy, Timing, LoanRecord } from "@geoquota/core";
import { type KeyArgs, keyArgsBuilder } from "./args.js";
import { RedisStoreError } from "./errors.js";
import {
  ALL_SHARDS,
  assertName,
  dirtyKey,
  drainGenKey,
  isCluster,
  parseKeyName,
  parseDirtyMember,
  type RedisClient,
  shardOf,
} from "./keys.js";
import type { LoanRefusal } from "./replies.js";
import { type Certifier, createCertifier, type Ticket } from "./certificate.js";
import { ensureIncarnation, shardNode } from "./replication.js";
import { bindScripts, type ScriptCaller } from "./scripts.js";
import {
  drainDirtyArgs,
  loanGrantArgs,
  loanMergeArgs,
  loanReturnArgs,
  loanReturnReceivedArgs,
} from "./script-args.js";
import { inspectKey, type KeyStateView } from "./store.js";

export type GrantResult =
  | {
      readonly ok: true;
      readonly loan: LoanRecord;
      readonly nowUs: number;
      /** False unless a durability certificate (certificate.ts) covers the grant: do not ship the loan. */
      readonly durable: boolean;
    }
  | {
      readonly ok: false;
      readonly reason: LoanRefusal;
      readonly nowUs: number;
    };

export interface GossipStore {
  readonly region: string;
  /** The marker `<id>:<bornUs>` of the tenant's shard (shard 0 without a tenant; created, in recovery, if missing). */
  currentIncarnation(tenant?: string): Promise<{ marker: string; id: string; bornUs: number; nowUs: number }>;
  /** Lends `units` ppm of this region's base to `borrower` until now + duration (default D). */
  grantLoan(policy: KeyPolicy, borrower: string, units: number, durationUs?: number): Promise<GrantResult>;
  /** Merges loans addressed to this region and remote counter entries (`p|r.i` → value, max). */
  mergeRemote(
    policy: KeyPolicy,
    loans: readonly LoanRecord[],
    counters: Readonly<Record<string, number>>,
  ): Promise<{ loansChanged: number; countersChanged: number; nowUs: number }>;
  /**
   * Returns early the loan held from `lender`; send `seq` to the lender only if `durable`.
   * `seq` 0: nothing held, or refused because the share backs outstanding in-process leases.
   */
  returnLoan(policy: KeyPolicy, lender: string): Promise<{ seq: number; nowUs: number; durable: boolean }>;
  /** The lender's side of a return. */
  receiveReturn(
    policy: KeyPolicy,
    borrower: string,
    seq: number,
  ): Promise<{ dropped: number; nowUs: number }>;
  /** Pops up to `max` changed keys from the change feeds of all shards. */
  drainDirty(max: number): Promise<{ nowUs: number; keys: { tenant: string; resource: string }[] }>;
  /**
   * One SCAN step over the keys' hashes (anti-entropy: keys no check
   * touched lately). `cursor` "0" starts and ends a sweep; on a Cluster it
   * walks the masters in turn.
   */
  sweepKeys(
    cursor: string,
    count: number,
  ): Promise<{ cursor: string; keys: { tenant: string; resource: string }[] }>;
  /**
   * Everything the region holds for one key (counters, loans, leases, share),
   * read-only; `ticket` names the connection and socket generation the read
   * went out on (pass it to `waitDurable` to certify what the read returned).
   */
  readKeyState(policy: KeyPolicy): Promise<KeyStateView & { readonly ticket: Ticket }>;
  /**
   * True when a durability certificate (certificate.ts) covers every write
   * the key's shard server had when `since` was taken (default: now) — so
   * what a read issued after `since` returned may be shipped. False after a
   * reconnect since `since` (the read may have come from another server).
   * Always true with `replicas: 0`.
   */
  waitDurable(policy: KeyPolicy, since?: Ticket): Promise<boolean>;
}

export interface GossipStoreOptions {
  readonly redis: RedisClient;
  readonly region: string;
  readonly timing: Timing;
  /** WAIT timeout for grant and return durability, ms. Default 100 (it blocks the connection meanwhile). */
  readonly waitTimeoutMs?: number;
  /**
   * Replicas every grant and return must reach before it is `durable`
   * (config `redis.replicas`). Default 0: no replicas, nothing waited for.
   */
  readonly replicas?: number;
}

const MAX_DRAIN = 10_000;

/**
 * The keys holding counters: `gq:{s<k>}:<tenant>:<resource>:b`, and `…:c` of keys not converted
 * since issue 24 (keys.ts keyNames); a key with both is listed once per step.
 */
const COUNTER_KEY_PATTERN = "gq:{s*}:*:*:[bc]";

/**
 * One SCAN step. On a Cluster the cursor walks the masters in turn:
 * `<node index>:<node cursor>` ("0" = start and end, as for SCAN).
 */
async function scanStep(redis: RedisClient, cursor: string, count: number): Promise<[string, string[]]> {
  if (!isCluster(redis)) return redis.scan(cursor, "MATCH", COUNTER_KEY_PATTERN, "COUNT", count);
  const masters: Redis[] = redis
    .nodes("master")
    .slice()
    .sort((a, b) =>
      `${a.options.host}:${a.options.port}`.localeCompare(`${b.options.host}:${b.options.port}`),
    );
  const at = cursor.indexOf(":");
  let node = at < 0 ? 0 : Number(cursor.slice(0, at));
  const inner = at < 0 ? "0" : cursor.slice(at + 1);
  if (!(node >= 0 && node < masters.length)) return ["0", []];
  const [next, names] = await (masters[node] as Redis).scan(
    inner,
    "MATCH",
    COUNTER_KEY_PATTERN,
    "COUNT",
    count,
  );
  if (next !== "0") return [`${node}:${next}`, names];
  node += 1;
  return [node < masters.length ? `${node}:0` : "0", names];
}

export function createGossipStore(options: GossipStoreOptions): GossipStore {
  const { redis, region, timing } = options;
  assertName("region", region);
  const scripts: ScriptCaller = bindScripts(redis);
  const args: (p: KeyPolicy) => KeyArgs = keyArgsBuilder(timing);
  const replicas = options.replicas ?? 0;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `replicas ${replicas}`);
  }
  const certifier: Certifier = createCertifier(redis, { replicas, timeoutMs: options.waitTimeoutMs ?? 100 });
  let drainStart = 0;
  // Standalone: every shard's feed in one script call (its keys need no common slot).
  const allFeedKeys = ALL_SHARDS.flatMap((k) => [dirtyKey(k), drainGenKey(k)]);
  const drainAll = (max: number, first: number) =>
    scripts.run("drainDirty", drainDirtyArgs(allFeedKeys, max, first));
  // Cluster: a script may only touch one slot, so one SCARD per shard (on its
  // node) shares the budget and only the shards with members get a drain call.
  async function drainClusterShards(max: number, first: number) {
    const sizes = await Promise.all(ALL_SHARDS.map((k) => shardNode(redis, k).scard(dirtyKey(k))));
    const calls = [];
    let budget = max;
    for (let i = 0; i < ALL_SHARDS.length && budget > 0; i++) {
      const k = (first + i) % ALL_SHARDS.length;
      const n = Math.min(sizes[k] ?? 0, budget);
      if (n === 0) continue;
      budget -= n;
      calls.push(scripts.run("drainDirty", drainDirtyArgs([dirtyKey(k), drainGenKey(k)], n, 0)));
    }
    if (calls.length === 0) {
      const [sec, usec] = await shardNode(redis, 0).time();
      return [{ nowUs: Number(sec) * 1_000_000 + Number(usec), members: [] as string[] }];
    }
    return Promise.all(calls);
  }

  return {
    region,

    async currentIncarnation(tenant) {
      if (tenant !== undefined) assertName("tenant", tenant);
      const r = await ensureIncarnation(redis, tenant === undefined ? 0 : shardOf(tenant));
      const at = r.marker.indexOf(":");
      return {
        marker: r.marker,
        id: r.marker.slice(0, at),
        bornUs: Number(r.marker.slice(at + 1)),
        nowUs: r.nowUs,
      };
    },

    async grantLoan(policy, borrower, units, durationUs = timing.loanDurationUs) {
      assertName("borrower", borrower);
      if (!(durationUs > 0) || !Number.isInteger(durationUs)) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `loan duration ${durationUs} µs`);
      }
      const a = args(policy);
      const ticket = certifier.ticket(a.shard);
      const r = await scripts.run("loanGrant", loanGrantArgs(a, region, borrower, units, durationUs));
      if (!r.ok) return r;
      const { durable } = await certifier.certify(ticket);
      const loan: LoanRecord = {
        lender: region,
        borrower,
        units: r.units,
        deadlineUs: r.deadlineUs,
        seq: r.seq,
      };
      return { ok: true, loan, nowUs: r.nowUs, durable };
    },

    async mergeRemote(policy, loans, counters) {
      const mine = loans.filter((l) => l.borrower === region);
      for (const l of mine) assertName("lender", l.lender);
      const entries = Object.entries(counters).filter(([f, v]) => /^[pnd]\|/.test(f) && Number.isFinite(v));
      return scripts.run("loanMerge", loanMergeArgs(args(policy), region, mine, entries));
    },

    async returnLoan(policy, lender) {
      assertName("lender", lender);
      const a = args(policy);
      const ticket = certifier.ticket(a.shard);
      const { seq, nowUs } = await scripts.run("loanReturn", loanReturnArgs(a, region, lender));
      const durable = seq > 0 ? (await certifier.certify(ticket)).durable : true;
      return { seq, nowUs, durable };
    },

    async receiveReturn(policy, borrower, seq) {
      assertName("borrower", borrower);
      return scripts.run("loanReturnReceived", loanReturnReceivedArgs(args(policy), region, borrower, seq));
    },

    async drainDirty(max) {
      if (!Number.isInteger(max) || max < 1 || max > MAX_DRAIN) {
        throw new RedisStoreError("GQ_ERR_BAD_ARGUMENT", `drain max ${max}`);
      }
      // The budget is shared over the shards starting at a rotating shard, so a
      // budget smaller than the backlog serves every shard in turn. Only a shard
      // something is popped from starts a new drain generation (drain_dirty.lua
      // says why an idle one need not), so a quiet region's round costs one call.
      const first = drainStart;
      drainStart = (drainStart + 1) % ALL_SHARDS.length;
      const replies = isCluster(redis) ? await drainClusterShards(max, first) : [await drainAll(max, first)];
      let nowUs = 0;
      const keys: { tenant: string; resource: string }[] = [];
      for (const r of replies) {
        nowUs = Math.max(nowUs, r.nowUs);
        for (const m of r.members) keys.push(parseDirtyMember(m));
      }
      return { nowUs, keys };
    },

    async sweepKeys(cursor, count) {
      const [next, names] = await scanStep(redis, cursor, count);
      const keys: { tenant: string; resource: string }[] = [];
      const seen = new Set<string>();
      for (const n of names) {
        const k = parseKeyName(n);
        if (k && !seen.has(n.slice(0, -1))) {
          seen.add(n.slice(0, -1));
          keys.push(k);
        }
      }
      return { cursor: next, keys };
    },

    async readKeyState(policy) {
      const a = args(policy);
      const ticket = certifier.ticket(a.shard);
      return { ...(await inspectKey(scripts, a, region)), ticket };
    },

    async waitDurable(policy, since) {
      return (await certifier.certify(since ?? certifier.ticket(shardOf(policy.tenant)))).durable;
    },
  };
}
