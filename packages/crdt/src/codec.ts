// Wire codec: msgpack frames, protocol version 1. Frames are positional
// arrays (no field names) with a per-frame string table for replica/region
// ids, which keeps a changed key at ~25–40 bytes. Layout (see README):
//
//   delta  [1, 1, from, version, ids[], entries[]]
//          entry = [key, p[], n[], d[], loans[], returned[]]   trailing empty parts omitted
//          p/n/d    = flat [idIndex, amount, ...]
//          loans    = flat [lenderIdx, borrowerIdx, units, deadlineUs, seq, ...]
//          returned = flat [lenderIdx, borrowerIdx, seq, ...]
//   ack    [1, 2, from, version]
//   digest [1, 3, from, bucket, bucketCount, flat [key, hash, ...]]
//   clock  [1, 4, from, txUs, echoUs, holdUs]
//   links  [1, 5, from, up[]]        the peers whose link is up at the sender
//
// The clock and links kinds were added within version 1: they are additive (a
// decoder that predates them drops them as GQ_ERR_UNKNOWN_KIND and every other
// frame is unchanged). A peer that sends no clock frame is simply one without
// an offset estimate (docs/design.md §1.2); one that sends no links frame gets
// every change relayed to it, as before links existed.
//
// Early returns travel inside delta records (the `returned` part), so there is
// no separate return frame. Decoding validates everything before building
// anything the caller can apply, and reports failures as Result values.
import { Decoder, Encoder } from "@msgpack/msgpack";
import { type CrdtError, type ErrorCode, err, ok, type Result } from "./errors.js";
import { isValidAmount } from "./gcounter.js";
import { ID_PATTERN, isValidKey, KEY_LENGTH_MAX } from "./ids.js";
import {
  isNonNegativeSafeInt,
  isValidUnits,
  type Loan,
  LoanRegister,
  pairKey,
  type ReturnedMark,
} from "./loans.js";
import { KeyRecord } from "./record.js";
import type { DeltaEntry } from "./shipper.js";

export const PROTOCOL_VERSION = 1;
export const SUPPORTED_VERSIONS: readonly number[] = [1];

const KIND_DELTA = 1;
const KIND_ACK = 2;
const KIND_DIGEST = 3;
const KIND_CLOCK = 4;
const KIND_LINKS = 5;

export interface DeltaFrame {
  kind: "delta";
  from: string;
  /** 0 = not part of the ack stream (full sync / repair): the receiver need not ack. */
  version: number;
  entries: DeltaEntry[];
}

export interface AckFrame {
  kind: "ack";
  from: string;
  version: number;
}

export interface DigestEntry {
  key: string;
  hash: number;
}

export interface DigestFrame {
  kind: "digest";
  from: string;
  bucket: number;
  bucketCount: number;
  entries: DigestEntry[];
}

/**
 * The sender's Redis TIME of this round, for the receiver's offset estimate
 * (packages/gossip daemon/clock-offsets.ts). All µs, safe integers.
 */
export interface ClockFrame {
  kind: "clock";
  from: string;
  /** Sender's Redis TIME, µs since the epoch (> 0). */
  txUs: number;
  /** The latest txUs the sender received from the receiver; 0 = none yet. */
  echoUs: number;
  /** Sender's monotonic µs from receiving echoUs to reading txUs (0 without an echo). */
  holdUs: number;
}

/**
 * The peers the sender has a link up to now (itself and the receiver left out): a receiver
 * relays what it learns from a peer only to peers that do not hear that peer themselves.
 */
export interface LinksFrame {
  kind: "links";
  from: string;
  up: string[];
}

export type Frame = DeltaFrame | AckFrame | DigestFrame | ClockFrame | LinksFrame;

export interface DecodeLimits {
  /** Default 1 MiB. */
  frameBytesMax: number;
  /** Keys per delta frame, and entries per digest frame. Default 10 000. */
  entriesMax: number;
  /** Items in one part of one record (e.g. replicas in `p`). Default 1 024. */
  itemsPerPartMax: number;
  /** Distinct ids in a frame's string table. Default 4 096. */
  idsMax: number;
}

export const DEFAULT_LIMITS: Readonly<DecodeLimits> = {
  frameBytesMax: 1 << 20,
  entriesMax: 10_000,
  itemsPerPartMax: 1_024,
  idsMax: 4_096,
};

const encoder = new Encoder({ ignoreUndefined: true });

/** Encodes a frame. Frames built from this package's own (validated) states always decode. */
export function encodeFrame(frame: Frame): Uint8Array {
  switch (frame.kind) {
    case "ack":
      return encoder.encode([PROTOCOL_VERSION, KIND_ACK, frame.from, frame.version]);
    case "digest": {
      const flat: Array<string | number> = [];
      for (const e of frame.entries) flat.push(e.key, e.hash);
      return encoder.encode([
        PROTOCOL_VERSION,
        KIND_DIGEST,
        frame.from,
        frame.bucket,
        frame.bucketCount,
        flat,
      ]);
    }
    case "delta":
      return encoder.encode(deltaToWire(frame));
    case "clock":
      return encoder.encode([
        PROTOCOL_VERSION,
        KIND_CLOCK,
        frame.from,
        frame.txUs,
        frame.echoUs,
        frame.holdUs,
      ]);
    case "links":
      return encoder.encode([PROTOCOL_VERSION, KIND_LINKS, frame.from, frame.up]);
  }
}

function deltaToWire(frame: DeltaFrame): unknown[] {
  const ids: string[] = [];
  const index = new Map<string, number>();
  const idx = (id: string): number => {
    let i = index.get(id);
    if (i === undefined) {
      i = ids.length;
      ids.push(id);
      index.set(id, i);
    }
    return i;
  };
  const counter = (m: ReadonlyMap<string, number>): number[] => {
    const out: number[] = [];
    for (const [id, v] of m) out.push(idx(id), v);
    return out;
  };
  const entries: unknown[] = [];
  for (const { key, record } of frame.entries) {
    const loans: number[] = [];
    for (const l of record.loans.values())
      loans.push(idx(l.lender), idx(l.borrower), l.units, l.deadlineUs, l.seq);
    const returned: number[] = [];
    for (const r of record.returned.values()) returned.push(idx(r.lender), idx(r.borrower), r.seq);
    const parts: unknown[] = [
      key,
      counter(record.consumed.p),
      counter(record.consumed.n),
      counter(record.denied),
      loans,
      returned,
    ];
    // Trailing empty parts cost a byte each: drop them (most deltas touch only `p`).
    while (parts.length > 2 && (parts[parts.length - 1] as unknown[]).length === 0) parts.pop();
    entries.push(parts);
  }
  return [PROTOCOL_VERSION, KIND_DELTA, frame.from, frame.version, ids, entries];
}

// ---- decoding ----

class DecodeFailure {
  constructor(readonly error: CrdtError) {}
}

function fail(code: ErrorCode, message: string): never {
  // Internal control flow only: decodeFrame catches it and returns a Result.
  throw new DecodeFailure({ code, message });
}

function asArray(v: unknown, what: string, max: number): unknown[] {
  if (!Array.isArray(v)) fail("GQ_ERR_INVALID_SHAPE", `${what} must be an array`);
  if (v.length > max) fail("GQ_ERR_TOO_MANY_ENTRIES", `${what} has ${v.length} items, limit ${max}`);
  return v;
}

function asId(v: unknown, what: string): string {
  if (typeof v !== "string" || !ID_PATTERN.test(v)) fail("GQ_ERR_INVALID_ID", `${what} is not a valid id`);
  return v;
}

function asSafeUint(v: unknown, what: string): number {
  if (typeof v !== "number") fail("GQ_ERR_INVALID_SHAPE", `${what} must be a number`);
  if (!isNonNegativeSafeInt(v)) fail("GQ_ERR_INVALID_NUMBER", `${what} must be a non-negative safe integer`);
  return v;
}

/** Decoders by their only limit-dependent option (a Decoder per frame was the decode's largest cost). */
const decoders = new Map<number, Decoder>();

function decoderFor(limits: DecodeLimits): Decoder {
  const maxArrayLength = Math.max(2 * limits.entriesMax, 5 * limits.itemsPerPartMax, limits.idsMax, 6);
  let d = decoders.get(maxArrayLength);
  if (d === undefined) {
    d = new Decoder({
      maxStrLength: KEY_LENGTH_MAX,
      maxBinLength: 0,
      maxExtLength: 0,
      maxMapLength: 0,
      maxArrayLength,
    });
    // Callers pick a few limit sets; bound the cache anyway.
    if (decoders.size >= 16) decoders.clear();
    decoders.set(maxArrayLength, d);
  }
  return d;
}

const defaultDecoder = decoderFor(DEFAULT_LIMITS);

/**
 * Decodes and validates one frame. Never throws: malformed input of any kind
 * gives `{ ok: false, error }` with a GQ_ERR_* code, and nothing is built for
 * the caller to apply unless the whole frame is valid.
 */
export function decodeFrame(bytes: Uint8Array, limits?: Partial<DecodeLimits>): Result<Frame> {
  const lim: DecodeLimits = limits === undefined ? DEFAULT_LIMITS : { ...DEFAULT_LIMITS, ...limits };
  if (!(bytes instanceof Uint8Array)) return err("GQ_ERR_INVALID_SHAPE", "frame must be a Uint8Array");
  if (bytes.byteLength > lim.frameBytesMax) {
    return err("GQ_ERR_FRAME_TOO_LARGE", `frame of ${bytes.byteLength} bytes exceeds ${lim.frameBytesMax}`);
  }
  let raw: unknown;
  try {
    raw = (limits === undefined ? defaultDecoder : decoderFor(lim)).decode(bytes);
  } catch (e) {
    return err("GQ_ERR_FRAME_MALFORMED", `msgpack: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    return ok(frameFromWire(raw, lim));
  } catch (e) {
    if (e instanceof DecodeFailure) return { ok: false, error: e.error };
    // A bug in validation must still not escape as an untyped throw.
    return err("GQ_ERR_INVALID_SHAPE", `invalid frame: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function frameFromWire(raw: unknown, lim: DecodeLimits): Frame {
  if (!Array.isArray(raw) || raw.length < 2)
    fail("GQ_ERR_INVALID_SHAPE", "frame must be an array [version, kind, ...]");
  const [version, kind] = raw;
  if (typeof version !== "number" || !SUPPORTED_VERSIONS.includes(version)) {
    fail("GQ_ERR_UNSUPPORTED_VERSION", `protocol version ${String(version)} not supported`);
  }
  switch (kind) {
    case KIND_DELTA:
      return deltaFromWire(raw, lim);
    case KIND_ACK:
      if (raw.length !== 4) fail("GQ_ERR_INVALID_SHAPE", "ack frame must have 4 fields");
      return { kind: "ack", from: asId(raw[2], "from"), version: asSafeUint(raw[3], "version") };
    case KIND_DIGEST:
      return digestFromWire(raw, lim);
    case KIND_CLOCK:
      return clockFromWire(raw);
    case KIND_LINKS: {
      if (raw.length !== 4) fail("GQ_ERR_INVALID_SHAPE", "links frame must have 4 fields");
      const up = asArray(raw[3], "links up", lim.idsMax).map((v, i) => asId(v, `links up[${i}]`));
      return { kind: "links", from: asId(raw[2], "from"), up };
    }
    default:
      return fail("GQ_ERR_UNKNOWN_KIND", `unknown frame kind ${String(kind)}`);
  }
}

/** A whole hour: no hold between a receipt and the next round's read is that long. */
const CLOCK_HOLD_MAX_US = 3_600_000_000;

function clockFromWire(raw: unknown[]): ClockFrame {
  if (raw.length !== 6) fail("GQ_ERR_INVALID_SHAPE", "clock frame must have 6 fields");
  const from = asId(raw[2], "from");
  const txUs = asSafeUint(raw[3], "clock txUs");
  const echoUs = asSafeUint(raw[4], "clock echoUs");
  const holdUs = asSafeUint(raw[5], "clock holdUs");
  if (txUs === 0) fail("GQ_ERR_INVALID_CLOCK", "clock txUs must be a Redis TIME in µs (> 0)");
  if (holdUs > CLOCK_HOLD_MAX_US)
    fail("GQ_ERR_INVALID_CLOCK", `clock holdUs ${holdUs} exceeds ${CLOCK_HOLD_MAX_US} (one hour)`);
  if (echoUs === 0 && holdUs !== 0) fail("GQ_ERR_INVALID_CLOCK", "clock holdUs must be 0 without an echo");
  return { kind: "clock", from, txUs, echoUs, holdUs };
}

function digestFromWire(raw: unknown[], lim: DecodeLimits): DigestFrame {
  if (raw.length !== 6) fail("GQ_ERR_INVALID_SHAPE", "digest frame must have 6 fields");
  const from = asId(raw[2], "from");
  const bucket = asSafeUint(raw[3], "bucket");
  const bucketCount = asSafeUint(raw[4], "bucketCount");
  if (bucketCount < 1 || bucket >= bucketCount) fail("GQ_ERR_INVALID_NUMBER", "bucket must be < bucketCount");
  const flat = asArray(raw[5], "digest entries", 2 * lim.entriesMax);
  if (flat.length % 2 !== 0) fail("GQ_ERR_INVALID_SHAPE", "digest entries must be [key, hash] pairs");
  const entries: DigestEntry[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const key = flat[i];
    if (!isValidKey(key)) fail("GQ_ERR_INVALID_KEY", `digest entry ${i / 2} has an invalid key`);
    const hash = asSafeUint(flat[i + 1], "hash");
    if (hash > 0xffffffff) fail("GQ_ERR_INVALID_NUMBER", "hash must be a uint32");
    entries.push({ key, hash });
  }
  return { kind: "digest", from, bucket, bucketCount, entries };
}

function deltaFromWire(raw: unknown[], lim: DecodeLimits): DeltaFrame {
  if (raw.length !== 6) fail("GQ_ERR_INVALID_SHAPE", "delta frame must have 6 fields");
  const from = asId(raw[2], "from");
  const version = asSafeUint(raw[3], "version");
  const idsRaw = asArray(raw[4], "ids", lim.idsMax);
  const ids = idsRaw.map((v, i) => asId(v, `ids[${i}]`));
  const id = (v: unknown, what: string): string => {
    if (typeof v !== "number" || !Number.isInteger(v))
      fail("GQ_ERR_INVALID_SHAPE", `${what} must be an id index`);
    const s = ids[v];
    if (s === undefined) fail("GQ_ERR_INVALID_SHAPE", `${what} index ${v} out of range`);
    return s;
  };
  const entriesRaw = asArray(raw[5], "entries", lim.entriesMax);
  const entries: DeltaEntry[] = [];
  for (let e = 0; e < entriesRaw.length; e++) {
    const parts = asArray(entriesRaw[e], `entry ${e}`, 6);
    if (parts.length < 2) fail("GQ_ERR_INVALID_SHAPE", `entry ${e} must have a key and at least one part`);
    const key = parts[0];
    if (!isValidKey(key)) fail("GQ_ERR_INVALID_KEY", `entry ${e} has an invalid key`);
    const record = KeyRecord.initial();
    const part = (i: number, stride: number): unknown[] => {
      const p = parts[i];
      if (p === undefined) return [];
      const arr = asArray(p, `entry ${e} part ${i}`, stride * lim.itemsPerPartMax);
      if (arr.length % stride !== 0)
        fail("GQ_ERR_INVALID_SHAPE", `entry ${e} part ${i} length not a multiple of ${stride}`);
      return arr;
    };
    const counterPart = (i: number, into: Map<string, number>): void => {
      const arr = part(i, 2);
      for (let j = 0; j < arr.length; j += 2) {
        const replica = id(arr[j], `entry ${e} part ${i} replica`);
        const amount = arr[j + 1];
        if (typeof amount !== "number") fail("GQ_ERR_INVALID_SHAPE", `entry ${e} amount must be a number`);
        if (!isValidAmount(amount))
          fail("GQ_ERR_INVALID_NUMBER", `entry ${e} amount must be finite and >= 0`);
        // Duplicate replica in one part: keep the max, as join would.
        const cur = into.get(replica);
        if (cur === undefined || amount > cur) into.set(replica, amount);
      }
    };
    counterPart(1, record.consumed.p);
    counterPart(2, record.consumed.n);
    counterPart(3, record.denied);
    const loans = part(4, 5);
    for (let j = 0; j < loans.length; j += 5) {
      const lender = id(loans[j], `entry ${e} lender`);
      const borrower = id(loans[j + 1], `entry ${e} borrower`);
      const units = loans[j + 2];
      if (!isValidUnits(units))
        fail("GQ_ERR_INVALID_NUMBER", `entry ${e} loan units must be an integer in [0, 1e6]`);
      const loan: Loan = {
        lender,
        borrower,
        units,
        deadlineUs: asSafeUint(loans[j + 3], "deadlineUs"),
        seq: asSafeUint(loans[j + 4], "seq"),
      };
      // A pair repeated within one record resolves exactly as join does.
      LoanRegister.mergeInto(record.loans, new Map([[pairKey(lender, borrower), loan]]));
    }
    const returned = part(5, 3);
    for (let j = 0; j < returned.length; j += 3) {
      const mark: ReturnedMark = {
        lender: id(returned[j], `entry ${e} lender`),
        borrower: id(returned[j + 1], `entry ${e} borrower`),
        seq: asSafeUint(returned[j + 2], "returned seq"),
      };
      const k = pairKey(mark.lender, mark.borrower);
      const cur = record.returned.get(k);
      if (cur === undefined || mark.seq > cur.seq) record.returned.set(k, mark);
    }
    entries.push({ key, record });
  }
  return { kind: "delta", from, version, entries };
}
