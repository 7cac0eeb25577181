export { type CrdtBenchOptions, type CrdtBenchResult, type BytesScenario, runCrdtBench } from "./bench.js";
export {
  type AckFrame,
  DEFAULT_LIMITS,
  type DecodeLimits,
  type DeltaFrame,
  type DigestEntry,
  type ClockFrame,
  type DigestFrame,
  type LinksFrame,
  decodeFrame,
  encodeFrame,
  type Frame,
  PROTOCOL_VERSION,
  SUPPORTED_VERSIONS,
} from "./codec.js";
export {
  bucketOf,
  canonicalRecordText,
  computeDigest,
  type DigestScope,
  fnv1a32,
  keysToRepair,
  recordHash,
} from "./digest.js";
export { type CrdtError, closeCodeOf, ERRORS, type ErrorCode, err, ok, type Result } from "./errors.js";
export { GCounter, isValidAmount } from "./gcounter.js";
export {
  decodeKey,
  encodeKey,
  ID_PATTERN,
  isValidId,
  isValidKey,
  KEY_LENGTH_MAX,
  regionOfReplica,
  replicaId,
} from "./ids.js";
export { CrdtMap } from "./keyed-map.js";
export {
  type Loan,
  type LoanConflict,
  LoanRegister,
  pairKey,
  type ReturnedMark,
  ReturnedRegister,
  U,
} from "./loans.js";
export { PNCounter } from "./pncounter.js";
export { KeyRecord } from "./record.js";
export { type ReceiveReport, Replica, type ReplicaOptions } from "./replica.js";
export { type DeltaBatch, type DeltaEntry, DeltaShipper, type DeltaShipperOptions } from "./shipper.js";
