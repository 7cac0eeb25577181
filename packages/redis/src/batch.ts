// Micro-batching of checks (issue 24 point 2, store option `batch`): concurrent
// `store.check` calls of one process are coalesced into one lua/check_batch.lua
// call per connection — flushed as soon as `maxChecks` are waiting, else at the
// first event-loop turn after `maxWaitUs` since the batch's first check. Redis
// runs check.lua's own text once per item, in arrival order, inside the one
// script: each decision sees the writes of the ones before it, the batch is
// atomic. On Redis Cluster every key of a script must be in one slot, so a
// batch there groups the checks of one shard (hash tag `{s<k>}`) only; on a
// standalone Redis one batch takes every shard.
//
// Durability holds per batch: with replicas, no decision of a batch that
// admitted anything is answered before the batch's certificate (one ticket,
// taken right before the batch is sent, as for a single check); a certificate
// that fails fails every admitted decision of the batch (NotDurableError; the
// denials are answered, as a single denial is). A script or Redis error fails
// every decision of the batch with that error, as it would fail a single check.
import type { KeyPolicy } from "@geoquota/core";
import { type KeyArgs, assertCost } from "./args.js";
import { RedisStoreError } from "./errors.js";
import type { CheckReply } from "./replies.js";
import { SCRIPTS } from "./specs.js";

export interface CheckBatching {
  /** A batch is sent as soon as this many checks wait (2 … MAX_BATCH_CHECKS). */
  readonly maxChecks: number;
  /** A partial batch is sent at the first event-loop turn this long after its first check (1 … 1 s). */
  readonly maxWaitUs: number;
}

export const MAX_BATCH_CHECKS = 1024;
export const MAX_BATCH_WAIT_US = 1_000_000;

/** GQ_ERR_BAD_ARGUMENT naming the setting out of range. */
export function assertBatching(b: CheckBatching): void {
  if (!Number.isInteger(b.maxChecks) || b.maxChecks < 2 || b.maxChecks > MAX_BATCH_CHECKS) {
    throw new RedisStoreError(
      "GQ_ERR_BAD_ARGUMENT",
      `batch.maxChecks ${b.maxChecks}: an integer in 2 … ${MAX_BATCH_CHECKS}`,
    );
  }
  if (!Number.isInteger(b.maxWaitUs) || b.maxWaitUs < 1 || b.maxWaitUs > MAX_BATCH_WAIT_US) {
    throw new RedisStoreError(
      "GQ_ERR_BAD_ARGUMENT",
      `batch.maxWaitUs ${b.maxWaitUs}: an integer in 1 … ${MAX_BATCH_WAIT_US} µs`,
    );
  }
}

/** What the store lends the batcher: one decision's reply → its answer, and the durability gate. */
export interface BatchDeps<D> {
  readonly region: string;
  readonly args: (policy: KeyPolicy) => KeyArgs;
  readonly cluster: boolean;
  /** check_batch.lua, the whole command (numkeys first) in one array. */
  readonly call: (command: readonly (string | number)[]) => Promise<readonly CheckReply[]>;
  readonly decide: (policy: KeyPolicy, reply: CheckReply, cost: number) => D;
  /** Right before the batch is sent (undefined: no durability wait). */
  readonly issue?: (shard: number) => unknown;
  /** Once it replied and admitted: resolves when durable, rejects (NotDurableError) otherwise. */
  readonly settle?: (ticket: unknown) => Promise<void>;
}

/** The checks waiting in one batch, in arrival order (parallel arrays: no object per check). */
class Batch<D> {
  n = 0;
  readonly args: KeyArgs[] = [];
  readonly policies: KeyPolicy[] = [];
  readonly costs: number[] = [];
  readonly resolves: ((d: D) => void)[] = [];
  readonly rejects: ((e: unknown) => void)[] = [];
  /** performance.now() at which a partial batch is due. */
  dueMs = 0;
}

/** One connection's (standalone) or one shard's (Cluster) open batch. */
interface Lane<D> {
  open: Batch<D>;
  readonly shard: number;
}

const KEYS_PER_ITEM = SCRIPTS.checkBatch.itemKeys.length;
const ARGV_PER_ITEM = SCRIPTS.checkBatch.itemArgv.length;

export interface CheckBatcher<D> {
  check(policy: KeyPolicy, cost: number): Promise<D>;
  /** Sends every open batch now (close: nothing is left waiting). */
  flushAll(): void;
}

export function createCheckBatcher<D>(options: CheckBatching, deps: BatchDeps<D>): CheckBatcher<D> {
  assertBatching(options);
  const { maxChecks, maxWaitUs } = options;
  const waitMs = maxWaitUs / 1000;
  // Node's timers count whole milliseconds: a bound of 1 ms or more waits on a timer for its
  // whole milliseconds, then (as a shorter bound does from the start) polls once per event-loop
  // turn (setImmediate) until the bound has passed; I/O is served between polls.
  const timerMs = Math.floor(waitMs);
  const lanes = new Map<number, Lane<D>>();
  const { region, args, call, decide, issue, settle } = deps;

  const lane = (shard: number): Lane<D> => {
    const key = deps.cluster ? shard : 0;
    let l = lanes.get(key);
    if (l === undefined) {
      l = { open: new Batch<D>(), shard };
      lanes.set(key, l);
    }
    return l;
  };

  const poll = (l: Lane<D>, b: Batch<D>): void => {
    if (l.open !== b) return; // flushed when full meanwhile
    if (performance.now() >= b.dueMs) flush(l);
    else setImmediate(poll, l, b);
  };

  const flush = (l: Lane<D>): void => {
    const b = l.open;
    if (b.n === 0) return;
    l.open = new Batch<D>();
    void send(b);
  };

  const send = async (b: Batch<D>): Promise<void> => {
    const n = b.n;
    const keysAt = 1;
    const argvAt = keysAt + KEYS_PER_ITEM * n;
    const command = new Array<string | number>(argvAt + 2 + ARGV_PER_ITEM * n);
    command[0] = KEYS_PER_ITEM * n;
    command[argvAt] = region;
    command[argvAt + 1] = n;
    for (let i = 0; i < n; i++) {
      const a = b.args[i] as KeyArgs;
      const ko = keysAt + KEYS_PER_ITEM * i;
      for (let j = 0; j < KEYS_PER_ITEM; j++) command[ko + j] = a.keys[j] as string;
      // Each item's one argument: its cost (the policy is read from its gq:pv key).
      command[argvAt + 2 + ARGV_PER_ITEM * i] = String(b.costs[i]);
    }
    const ticket = issue?.((b.args[0] as KeyArgs).shard);
    let replies: readonly CheckReply[];
    try {
      replies = await call(command);
      if (replies.length !== n) {
        throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `checkBatch: ${replies.length} replies to ${n}`);
      }
    } catch (err) {
      for (let i = 0; i < n; i++) (b.rejects[i] as (e: unknown) => void)(err);
      return;
    }
    let failed: unknown;
    if (ticket !== undefined && settle !== undefined && replies.some((r) => r.allowed)) {
      try {
        await settle(ticket);
      } catch (err) {
        failed = err;
      }
    }
    for (let i = 0; i < n; i++) {
      const r = replies[i] as CheckReply;
      if (failed !== undefined && r.allowed) (b.rejects[i] as (e: unknown) => void)(failed);
      else (b.resolves[i] as (d: D) => void)(decide(b.policies[i] as KeyPolicy, r, b.costs[i] as number));
    }
  };

  return {
    check(policy, cost) {
      // Misuse fails this check alone, before it joins a batch.
      let a: KeyArgs;
      try {
        assertCost(cost);
        a = args(policy);
      } catch (err) {
        return Promise.reject(err);
      }
      const l = lane(a.shard);
      return new Promise<D>((resolve, reject) => {
        const b = l.open;
        b.args.push(a);
        b.policies.push(policy);
        b.costs.push(cost);
        b.resolves.push(resolve);
        b.rejects.push(reject);
        b.n += 1;
        if (b.n >= maxChecks) flush(l);
        else if (b.n === 1) {
          b.dueMs = performance.now() + waitMs;
          if (timerMs >= 1) setTimeout(poll, timerMs, l, b);
          else setImmediate(poll, l, b);
        }
      });
    },
    flushAll() {
      for (const l of lanes.values()) flush(l);
    },
  };
}
