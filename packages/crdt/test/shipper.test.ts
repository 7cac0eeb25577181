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

describe("DeltaShipper: several frames per round, relays to some peers", () => {
  it("nextBatch(peer, after) gives the entries past a batch already sent and not yet acknowledged", () => {
    const s = new DeltaShipper({ peers: ["b"], maxEntriesPerFrame: 2 });
    for (let i = 0; i < 5; i++) s.record(`t|k${i}`, delta("a.1", i));
    const keysOf = (after: number) => {
      const r = s.nextBatch("b", after);
      return r.ok && r.value !== null
        ? { keys: r.value.entries.map((e) => e.key), v: r.value.version }
        : null;
    };
    const first = keysOf(0);
    expect(first?.keys).toEqual(["t|k0", "t|k1"]);
    const second = keysOf(first?.v ?? 0);
    expect(second?.keys).toEqual(["t|k2", "t|k3"]);
    const third = keysOf(second?.v ?? 0);
    expect(third?.keys).toEqual(["t|k4"]);
    expect(keysOf(third?.v ?? 0)).toBeNull();
    // Nothing was acknowledged: a new round starts again from the oldest.
    expect(keysOf(0)?.keys).toEqual(["t|k0", "t|k1"]);
    s.ack("b", second?.v ?? 0);
    expect(keysOf(0)?.keys).toEqual(["t|k4"]);
  });

  it("recordFor buffers for the peers it accepts only", () => {
    const s = new DeltaShipper({ peers: ["b", "c", "d"] });
    s.recordFor("t|x", delta("a.1", 1), (p) => p === "c");
    expect([s.bufferedKeys("b"), s.bufferedKeys("c"), s.bufferedKeys("d")]).toEqual([0, 1, 0]);
    s.record("t|y", delta("a.1", 2), "b");
    expect([s.bufferedKeys("b"), s.bufferedKeys("c"), s.bufferedKeys("d")]).toEqual([0, 2, 1]);
  });
});

describe("Replica.applyLocal: what leaves is what changed", () => {
  it("a record read back whole (every replica's counters) queues only the entries that moved", async () => {
    const { Replica } = await import("../src/index.js");
    const r = new Replica({ id: "a", peers: ["b"] });
    const whole = KeyRecord.initial();
    for (const id of ["a.1", "b.1", "c.1", "d.1"]) whole.consumed.p.set(id, 10);
    r.applyLocal("t|x", { ok: true, value: whole });
    r.shipper.ack("b", r.shipper.version);
    const next = KeyRecord.copy(whole);
    next.consumed.p.set("a.1", 11);
    r.applyLocal("t|x", { ok: true, value: next });
    const batch = r.shipper.nextBatch("b");
    const shipped = batch.ok ? batch.value?.entries[0]?.record : undefined;
    expect(shipped?.consumed.p).toEqual(new Map([["a.1", 11]]));
    expect(r.state.get("t|x")?.consumed.p.size).toBe(4);
    // Nothing moved: nothing queued.
    r.shipper.ack("b", r.shipper.version);
    r.applyLocal("t|x", { ok: true, value: next });
    expect(r.shipper.bufferedKeys("b")).toBe(0);
  });
});
