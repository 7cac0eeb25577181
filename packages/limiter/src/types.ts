// The limiter's core types: what a decision needs (a key's policy and this
// region's place in it) and what comes back. They are defined once, in the
// ground floor (@geoquota/core: the shared vocabulary and the store
// interface, src/store.ts); @geoquota/redis implements `RegionStore`; the HTTP
// service, the Fastify plugin, the leased in-process client and the gossip
// daemon use only these types.
export {
  type Algorithm,
  type CompoundCheckItem,
  type CompoundDecision,
  type Decision,
  type KeyPolicy,
  type Lease,
  type LimitSpec,
  type LoanRecord,
  type QuotaView,
  type RefundOutcome,
  type RefundReceiptRef,
  type RefundRefusal,
  type RegionStore,
  type ResetOutcome,
  SHARE_UNITS,
  StoreMisuseError,
  type Timing as LeaseTiming,
} from "@geoquota/core";
