// The frames pinned as golden files for the current protocol version. Change
// a fixture only together with a protocol version bump: old golden files stay
// and must keep decoding (or be rejected with GQ_ERR_UNSUPPORTED_VERSION).
import type { Frame } from "../../src/index.js";
import { KeyRecord } from "../../src/index.js";

function fullRecord(): KeyRecord {
  const r = KeyRecord.initial();
  r.consumed.p.set("us-east.k1", 1500);
  r.consumed.p.set("eu-west.a7", 20.5);
  r.consumed.n.set("us-east.k1", 3);
  r.denied.set("eu-west.a7", 42);
  r.loans.set("us-east>eu-west", {
    lender: "us-east",
    borrower: "eu-west",
    units: 120_000,
    deadlineUs: 1_732_000_003_000_000,
    seq: 1_732_000_000_000_001,
  });
  r.returned.set("eu-west>us-east", { lender: "eu-west", borrower: "us-east", seq: 1_731_999_000_000_000 });
  return r;
}

function admittedOnly(): KeyRecord {
  const r = KeyRecord.initial();
  r.consumed.p.set("us-east.k1", 77);
  return r;
}

export const GOLDEN_V1: Record<string, Frame> = {
  "v1-delta": {
    kind: "delta",
    from: "us-east",
    version: 1_732_000_000_123_456,
    entries: [
      { key: "acme|api.search", record: fullRecord() },
      { key: "acme|api.upload", record: admittedOnly() },
    ],
  },
  "v1-ack": { kind: "ack", from: "eu-west", version: 1_732_000_000_123_456 },
  // Added within v1 (an additive kind: older decoders drop it as unknown).
  "v1-clock": {
    kind: "clock",
    from: "eu-west",
    txUs: 1_732_000_000_250_000,
    echoUs: 1_732_000_000_123_456,
    holdUs: 180_250,
  },
  "v1-digest": {
    kind: "digest",
    from: "ap-south",
    bucket: 3,
    bucketCount: 16,
    entries: [
      { key: "acme|api.search", hash: 0xdeadbeef },
      { key: "globex|login", hash: 7 },
    ],
  },
};
