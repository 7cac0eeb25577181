// Each script's KEYS and ARGV as a typed tuple, built in one place beside the typed replies
// (replies.ts): the layouts are the `-- KEYS:` / `-- ARGV:` blocks of lua/*.lua (specs.ts, checked
// against the headers). The builders lay out arguments only; the callers (store.ts, gossip.ts,
// replication.ts) validate them first. check.lua's head and cost are args.ts checkHead/checkCost
// (joined once per policy); check_batch.lua's command is batch.ts's, from heads checked once.
import type { KeyArgs, ScriptKeys } from "./args.js";

/** ARGV 1 of every per-key script: the region (the policy is read from gq:pv, args.ts). */
export type KeyHeadArgv = readonly [region: string];

/** One call's KEYS and ARGV. */
export interface ScriptCall<K extends readonly string[], A extends readonly (string | number)[]> {
  readonly keys: K;
  readonly argv: A;
}

/** A lease released in a lease_acquire.lua call: its id and the tokens it used (Lua's text of them). */
export type LeaseReleaseArgv = readonly [leaseId: string, used: string];

/** One loan loan_merge.lua takes in: lender, units, deadline, seq. */
export type LoanMergeLoanArgv = readonly [lender: string, units: number, deadlineUs: number, seq: number];

/** The script calls the store, the gossip store and the region setup send, by script name. */
export interface ScriptArgs {
  readonly refund: ScriptCall<
    ScriptKeys,
    readonly [...KeyHeadArgv, cost: string, receiptId: string, admittedUs: number, expiresUs: number]
  >;
  /** Per item its 4 KEYS and its cost; then, when any item has one, each item's need. */
  readonly checkCompound: ScriptCall<
    readonly string[],
    readonly [region: string, itemCount: number, ...items: (string | number)[]]
  >;
  /** The fixed ARGV, then `releaseCount` × LeaseReleaseArgv. */
  readonly leaseAcquire: ScriptCall<
    ScriptKeys,
    readonly [
      ...KeyHeadArgv,
      leaseId: string,
      tokens: number,
      durationUs: number,
      releaseCount: number,
      ...releases: string[],
    ]
  >;
  readonly leaseRelease: ScriptCall<ScriptKeys, readonly [...KeyHeadArgv, leaseId: string, used: string]>;
  readonly assignReserve: ScriptCall<
    ScriptKeys,
    readonly [
      ...KeyHeadArgv,
      assignmentId: string,
      burst: number,
      rate: string,
      ttlUs: number,
      marginUs: number,
      supersedes: string,
    ]
  >;
  readonly assignUsage: ScriptCall<ScriptKeys, readonly [...KeyHeadArgv, allowed: string, denied: string]>;
  readonly loanGrant: ScriptCall<
    ScriptKeys,
    readonly [...KeyHeadArgv, borrower: string, units: number, durationUs: number]
  >;
  /** The fixed ARGV, then the loans (LoanMergeLoanArgv each), their count, the counter fields. */
  readonly loanMerge: ScriptCall<
    ScriptKeys,
    readonly [...KeyHeadArgv, loanCount: number, ...loansThenCounters: (string | number)[]]
  >;
  readonly loanReturn: ScriptCall<ScriptKeys, readonly [...KeyHeadArgv, lender: string]>;
  readonly loanReturnReceived: ScriptCall<
    ScriptKeys,
    readonly [...KeyHeadArgv, borrower: string, seq: number]
  >;
  readonly inspect: ScriptCall<ScriptKeys, KeyHeadArgv>;
  readonly reset: ScriptCall<ScriptKeys, KeyHeadArgv>;
  /** Per shard its change feed and drain generation (gq:{s<k>}:dirty, gq:{s<k>}:dg). */
  readonly drainDirty: ScriptCall<readonly string[], readonly [max: number, start: number]>;
  readonly regionInit: ScriptCall<
    readonly [inc: string, rid: string],
    readonly [mode: string, replid: string, freshId: string]
  >;
}

/** The script names with a typed call here (check and check_batch are prepared: scripts.ts). */
export type TypedScriptName = keyof ScriptArgs;

const head = (region: string): KeyHeadArgv => [region];

export function refundArgs(
  a: KeyArgs,
  region: string,
  cost: number,
  receipt: { readonly id: string; readonly admittedUs: number; readonly expiresUs: number },
): ScriptArgs["refund"] {
  return {
    keys: a.keys,
    argv: [...head(region), String(cost), receipt.id, receipt.admittedUs, receipt.expiresUs],
  };
}

/** One compound item: its key arguments, its cost and (check-only items) what it needs. */
export interface CompoundItemArgs {
  readonly args: KeyArgs;
  readonly cost: number;
  readonly need?: number | undefined;
}

export function checkCompoundArgs(
  region: string,
  items: readonly CompoundItemArgs[],
): ScriptArgs["checkCompound"] {
  const keys: string[] = [];
  const rest: (string | number)[] = [];
  for (const it of items) {
    keys.push(...it.args.keys);
    rest.push(String(it.cost));
  }
  // Needs follow the items only when some item has one; absent, every item needs its cost.
  if (items.some((it) => it.need !== undefined))
    for (const it of items) rest.push(String(it.need ?? it.cost));
  return { keys, argv: [region, items.length, ...rest] };
}

export function leaseAcquireArgs(
  a: KeyArgs,
  region: string,
  leaseId: string,
  tokens: number,
  durationUs: number,
  releases: readonly { readonly leaseId: string; readonly used: number }[],
): ScriptArgs["leaseAcquire"] {
  const released = releases.flatMap((r): LeaseReleaseArgv => [r.leaseId, String(r.used)]);
  return {
    keys: a.keys,
    argv: [...head(region), leaseId, tokens, durationUs, releases.length, ...released],
  };
}

export function leaseReleaseArgs(
  a: KeyArgs,
  region: string,
  leaseId: string,
  used: number,
): ScriptArgs["leaseRelease"] {
  return { keys: a.keys, argv: [...head(region), leaseId, String(used)] };
}

/**
 * assign_reserve.lua (RLQS): `rate` in tokens per second, sent as Lua's text of it; `supersedes`
 * the id of the assignment this one renews ("" for none).
 */
export function assignReserveArgs(
  a: KeyArgs,
  region: string,
  assignmentId: string,
  burst: number,
  rate: number,
  ttlUs: number,
  marginUs: number,
  supersedes = "",
): ScriptArgs["assignReserve"] {
  return {
    keys: a.keys,
    argv: [...head(region), assignmentId, burst, String(rate), ttlUs, marginUs, supersedes],
  };
}

/** assign_usage.lua (RLQS): a usage report's counts, as Lua's text of them. */
export function assignUsageArgs(
  a: KeyArgs,
  region: string,
  allowed: number,
  denied: number,
): ScriptArgs["assignUsage"] {
  return { keys: a.keys, argv: [...head(region), String(allowed), String(denied)] };
}

export function loanGrantArgs(
  a: KeyArgs,
  region: string,
  borrower: string,
  units: number,
  durationUs: number,
): ScriptArgs["loanGrant"] {
  return { keys: a.keys, argv: [...head(region), borrower, units, durationUs] };
}

export function loanMergeArgs(
  a: KeyArgs,
  region: string,
  loans: readonly {
    readonly lender: string;
    readonly units: number;
    readonly deadlineUs: number;
    readonly seq: number;
  }[],
  counters: readonly (readonly [field: string, value: number])[],
): ScriptArgs["loanMerge"] {
  const loanArgv = loans.flatMap((l): LoanMergeLoanArgv => [l.lender, l.units, l.deadlineUs, l.seq]);
  const counterArgv = counters.flatMap(([f, v]) => [f, String(v)]);
  return {
    keys: a.keys,
    argv: [...head(region), loans.length, ...loanArgv, counters.length, ...counterArgv],
  };
}

export function loanReturnArgs(a: KeyArgs, region: string, lender: string): ScriptArgs["loanReturn"] {
  return { keys: a.keys, argv: [...head(region), lender] };
}

export function loanReturnReceivedArgs(
  a: KeyArgs,
  region: string,
  borrower: string,
  seq: number,
): ScriptArgs["loanReturnReceived"] {
  return { keys: a.keys, argv: [...head(region), borrower, seq] };
}

/** inspect.lua and reset.lua take the per-key head only. */
export function keyHeadArgs(a: KeyArgs, region: string): ScriptArgs["inspect"] & ScriptArgs["reset"] {
  return { keys: a.keys, argv: head(region) };
}

/** `feeds`: per shard, its change feed and drain generation keys, flattened. */
export function drainDirtyArgs(
  feeds: readonly string[],
  max: number,
  start: number,
): ScriptArgs["drainDirty"] {
  return { keys: feeds, argv: [max, start] };
}

export function regionInitArgs(
  incKey: string,
  ridKey: string,
  mode: string,
  replid: string,
  freshId: string,
): ScriptArgs["regionInit"] {
  return { keys: [incKey, ridKey], argv: [mode, replid, freshId] };
}
