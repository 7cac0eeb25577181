// What one region's Redis holds for one key, as plain data: the reference
// model the Lua scripts implement (docs/internals.md key schema). The names in
// backquotes are where each lives in the key's hash `P:b` (msgpack fields: `v` the
// bucket, `w` the window, `q` the log sequence, `c` the incarnation tag and own
// counters); the encoding is the Redis side's, the numbers are the same doubles.
import { emptyLoanBook, type LoanBook, type Schedule } from "./schedule.js";
import type { LeaseHold } from "../types.js";

/** `P:b` for the rate algorithms. */
export interface BucketHash {
  /** Token bucket: tokens at `tsUs`. GCRA: theoretical arrival time, µs (`v`'s value). */
  value: number;
  /** `v`'s ts: last settle, µs. */
  tsUs: number;
  /** `c`'s tag: the marker the state belongs to; another marker means the state is discarded. */
  inc: string;
  /** `v`'s k (a policy version's number; its fingerprint in gq:pvn): another one means the bucket restarts. */
  pv: string;
  /** `v`'s s, o, sx1 and `x`: the share schedule from `tsUs` on. */
  schedule: Schedule;
  /** `v`'s rf: headroom suffix minima for refunds, flat [t µs, milli-tokens, …] (refunds.ts). */
  refunds: number[];
}

/** `P:b` for the window algorithms. */
export interface WindowHash {
  /** `c`'s tag, as for the bucket. */
  inc: string;
  /** `w`'s first value: index of the window `count` counts. */
  window: number;
  /** `w`'s second: cost admitted in window `window`. */
  count: number;
  /** `w`'s third: sliding counter only, cost admitted in window `window − 1`. */
  previous: number;
}

/** One `P:z` entry of the sliding log: score = admission time, member `<seq>:<cost>`. */
export interface LogEntry {
  readonly scoreUs: number;
  readonly member: string;
}

export interface KeyState {
  bucket: BucketHash | undefined;
  window: WindowHash | undefined;
  /** `P:z` and the member sequence `q` kept in `P:b`. */
  log: LogEntry[];
  logSeq: number;
  logInc: string | undefined;
  /** CRDT counters by field (`p|`, `n|`, `d|` + replica id): `c`'s own ones and `P:b`'s named fields. */
  readonly counters: Map<string, number>;
  /** `P:l` */
  readonly book: LoanBook;
  /** `P:k`: in-process leases by id. */
  readonly leases: Map<string, LeaseHold>;
}

export function emptyKeyState(): KeyState {
  return {
    bucket: undefined,
    window: undefined,
    log: [],
    logSeq: 0,
    logInc: undefined,
    counters: new Map(),
    book: emptyLoanBook(),
    leases: new Map(),
  };
}

/** A region's shard-wide keys: the marker `gq:{s<k>}:inc` of the modelled key's shard (the model keeps keys by name). */
export interface RegionState {
  readonly region: string;
  marker: string | undefined;
}
