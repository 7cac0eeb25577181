// @geoquota/core: the pure reference model of a region's quota state (share
// function, piecewise lazy refill, checks, leases, loans, recovery). No I/O:
// every operation takes the time the Redis script would read from TIME. Also
// the ground floor's shared vocabulary (types.ts) and the store interface the
// limiter runs on and @geoquota/redis implements (store.ts).
export {
  type BucketHash,
  type KeyState,
  type LogEntry,
  type RegionState,
  type WindowHash,
  emptyKeyState,
} from "./state.js";
export {
  applyShareChange,
  ensureMarker,
  type LiveBucket,
  liveCapacity,
  liveRate,
  loadBucket,
  scheduleFor,
  shareInputs,
  storeBucket,
} from "./bucket.js";
export {
  formatMarker,
  freshIncarnation,
  type Incarnation,
  leaseHoldEndUs,
  newIncarnation,
  parseMarker,
  recoveryEndUs,
  replicaId,
} from "./marker.js";
export {
  acquireLease,
  check,
  checkCompound,
  type CheckOutcome,
  type CompoundItem,
  counterField,
  type LeaseOutcome,
  peek,
  refund,
  releaseLease,
  renewLease,
  startsEmpty,
} from "./ops.js";
export {
  type GrantOutcome,
  type GrantRefusal,
  grantLoan,
  lendable,
  mergeRemote,
  pruneLoans,
  type ReceivedLoan,
  receiveReturn,
  returnLoan,
} from "./loans.js";
export {
  capacityOf,
  fullRefillUs,
  rateOf,
  refillPiece,
  type Settled,
  settle,
  tatFromTokens,
  tokensFromTat,
} from "./refill.js";
export {
  buildSchedule,
  emptyLoanBook,
  leaseBreakpoints,
  type LoanBook,
  loanOutstanding,
  loanUsable,
  outstandingAt,
  reservedAt,
  type Schedule,
  type SchedulePoint,
  type ShareInputs,
  shareAt,
  shareBreakpoints,
} from "./share.js";
export {
  COUNTER_KINDS,
  type CounterKind,
  counterFieldOf,
  INCARNATION_PATTERN,
  hashKey,
  isName,
  KEY_MAX_LENGTH,
  KEY_PATTERN,
  KEY_SEPARATOR,
  keyHashSecretOf,
  keyPartHasher,
  NAME_CHARS,
  NAME_MESSAGE,
  NAME_PATTERN,
  parseCounterField,
  parseQuotaKey,
  quotaKey,
  regionOfReplica,
  replicaIdOf,
} from "./ids.js";
export { MemoryBucket } from "./memory-bucket.js";
export {
  type CompoundCheckItem,
  type CompoundDecision,
  type Decision,
  type Lease,
  type LoanRecord,
  type QuotaView,
  type RefundOutcome,
  type RefundReceiptRef,
  type RefundRefusal,
  type ResetOutcome,
  type RegionStore,
  StoreMisuseError,
} from "./store.js";
export { pinExcess, pinsHold } from "./pins.js";
export {
  ALGORITHMS,
  type Algorithm,
  bucketVersion,
  isRateAlgorithm,
  leaseHold,
  type KeyLimit,
  type KeyPolicy,
  type LeaseHold,
  type LimitSpec,
  type LoanEntry,
  policyVersion,
  SHARE_UNITS,
  type Timing,
  US_PER_SECOND,
} from "./types.js";
export {
  REFUND_FLOOR_ENTRIES,
  refundBarrier,
  refundErase,
  refundFloor,
  refundMilli,
  refundNote,
  refundNoteLow,
} from "./refunds.js";
export { decideWindow, logEntryCost, refundWindow, sliceLimit, type WindowOutcome } from "./windows.js";
