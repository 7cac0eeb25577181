import { describe, expect, it } from "vitest";
import { DeltaShipper, KeyRecord } from "../src/index.js";

function delta(replica: string, v: number): KeyRecord {
  const r = KeyRecord.initial();
  r.consumed.p.set(replica, v);
  return r;
}

describe("DeltaShipper", () => {
  it("coalesces per key and ships the oldest first with the right version", () => {
    const s = new DeltaShipper({ peers: ["b", "c"], maxEntriesPerFrame: 2 });
    s.record("t|x", delta("a.1", 1));
    s.record("t|y", delta("a.1", 2));
    s.record("t|x", delta("a.2", 3));
    s.record("t|z", delta("a.1", 4));
    expect(s.version).toBe(4);
    expect(s.bufferedKeys("b")).toBe(3);
    const b1 = s.nextBatch("b");
    expect(b1.ok && b1.value?.entries.map((e) => e.key)).toEqual(["t|y", "t|x"]);
    expect(b1.ok && b1.value?.version).toBe(3);
    const x = b1.ok ? b1.value?.entries[1]?.record : undefined;
    expect(x?.consumed.p).toEqual(
      new Map([
        ["a.1", 1],
        ["a.2", 3],
      ]),
    );
  });

  it("acks are idempotent: stale, repeated and future acks do no harm", () => {
    const s = new DeltaShipper({ peers: ["b"] });
    s.record("t|x", delta("a.1", 1));
    s.record("t|y", delta("a.1", 2));
    const batch = s.nextBatch("b");
    const v = batch.ok ? (batch.value?.version ?? 0) : 0;
    s.record("t|x", delta("a.1", 5)); // changed after the batch was taken
    expect(s.ack("b", 999).ok).toBe(true); // a version never sent: ignored
    expect(s.bufferedKeys("b")).toBe(2);
    s.ack("b", v);
    expect(s.bufferedKeys("b")).toBe(1); // t|x changed again: still pending
    s.ack("b", v);
    s.ack("b", 1);
    expect(s.bufferedKeys("b")).toBe(1);
    expect(s.ackedVersion("b")).toBe(v);
    const next = s.nextBatch("b");
    expect(next.ok && next.value?.entries[0]?.record.consumed.p.get("a.1")).toBe(5);
    s.ack("b", s.version);
    expect(s.nextBatch("b")).toEqual({ ok: true, value: null });
    const unknown = s.ack("zz", 1);
    expect(!unknown.ok && unknown.error.code).toBe("GQ_ERR_UNKNOWN_PEER");
  });

  it("never buffers more than maxBufferedKeys: overflow flags the peer for full sync", () => {
    const s = new DeltaShipper({ peers: ["b", "c"], maxBufferedKeys: 3 });
    for (let i = 0; i < 3; i++) s.record(`t|k${i}`, delta("a.1", i));
    s.ack("c", s.version);
    expect(s.needsFullSync("b")).toBe(false);
    s.record("t|k3", delta("a.1", 9));
    expect(s.needsFullSync("b")).toBe(true);
    expect(s.bufferedKeys("b")).toBe(1);
    expect(s.overflowCount("b")).toBe(1);
    expect(s.needsFullSync("c")).toBe(false);
    expect(s.bufferedKeys("c")).toBe(1);
    for (let i = 0; i < 100; i++) s.record(`t|m${i}`, delta("a.1", i));
    expect(s.bufferedKeys("b")).toBeLessThanOrEqual(3);
    s.markSynced("b");
    expect(s.needsFullSync("b")).toBe(false);
  });

  it("does not buffer a relayed change for the peer it came from; a late peer starts with a full sync", () => {
    const s = new DeltaShipper({ peers: ["b", "c"] });
    s.record("t|x", delta("b.1", 1), "b");
    expect(s.bufferedKeys("b")).toBe(0);
    expect(s.bufferedKeys("c")).toBe(1);
    s.addPeer("d");
    expect(s.needsFullSync("d")).toBe(true);
    s.removePeer("d");
    expect(s.peerIds).toEqual(["b", "c"]);
  });

  it("buffers a private copy, so later mutation of the caller's delta cannot leak in", () => {
    const s = new DeltaShipper({ peers: ["b"] });
    const d = delta("a.1", 1);
    s.record("t|x", d);
    d.consumed.p.set("a.1", 100);
    const b = s.nextBatch("b");
    expect(b.ok && b.value?.entries[0]?.record.consumed.p.get("a.1")).toBe(1);
  });
});
