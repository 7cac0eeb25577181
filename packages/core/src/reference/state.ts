// What one region's Redis holds for one key, as plain data: the reference
// model the Lua scripts implement (docs/internals.md key schema).
import { emptyLoanBook, type LoanBook, type Schedule } from "./schedule.js";
import type { LeaseHold } from "../types.js";

/** `P:b` for the rate algorithms. */
export interface BucketHash {
  /** Token bucket: tokens at `tsUs` (`tk`). GCRA: theoretical arrival time, µs (`ta`). */
  value: number;
  /** `ts`: last settle, µs. */
  tsUs: number;
  /** `inc`: the marker the state belongs to; another marker means the state is discarded. */
  inc: string;
  /** `pv`: policy fingerprint; another one means the bucket restarts empty. */
  pv: string;
  /** `s`, `o`, `sx`: the share schedule from `tsUs` on. */
  schedule: Schedule;
  /** `rf`: headroom suffix minima for refunds, flat [t µs, milli-tokens, …] (refunds.ts). */
  refunds: number[];
}

/** `P:b` for the window algorithms. */
export interface WindowHash {
  inc: string;
  /** `w`: index of the window `n` counts. */
  window: number;
  /** `n`: cost admitted in window `window`. */
  count: number;
  /** `pn`: sliding counter only, cost admitted in window `window − 1`. */
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
  /** `P:c`: CRDT counters by field (`p|`, `n|`, `d|` + replica id). */
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
