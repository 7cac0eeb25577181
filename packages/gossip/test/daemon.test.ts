// The daemon's round and frame handling against an in-memory store and link:
// bad frames are counted and dropped without any state change, valid deltas
// reach the store and are acknowledged, local changes are shipped.
import type { KeyPolicy } from "@geoquota/core";
import { decodeFrame, encodeFrame, KeyRecord, type Loan, type ReturnedMark } from "@geoquota/crdt";
import { encode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { type DaemonStore, GossipDaemon, type KeyReading } from "../src/index.js";

const regions = ["ap-south", "eu-west", "us-east"];
const quotas = regions.map((region) => ({ region, baseShare: 333_333, floorShare: 20_000 }));

function policy(tenant: string, resource: string): KeyPolicy {
  return {
    tenant,
    resource,
    limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 10 },
    baseShare: 333_333,
    floorShare: 20_000,
  };
}

class FakeStore implements DaemonStore {
  dirty: string[] = [];
  /** Keys read (readKey), in order. */
  reads: string[] = [];
  states = new Map<string, KeyReading>();
  merges: Array<{ key: string; record: KeyRecord }> = [];
  grants: Array<{ key: string; borrower: string; units: number }> = [];
  nowUs = 1_000_000;
  async drainDirty(max: number) {
    return this.dirty.splice(0, max);
  }
  async sweepKeys() {
    return { cursor: "0", keys: [] };
  }
  /** Counters merges wrote, per key: every read returns them too (a wiped key: delete its entry). */
  kept = new Map<string, KeyRecord>();
  async readKey(p: KeyPolicy): Promise<KeyReading> {
    const k = `${p.tenant}|${p.resource}`;
    this.reads.push(k);
    const state = this.states.get(k) ?? {
      nowUs: this.nowUs,
      recovering: false,
      record: KeyRecord.initial(),
      reserved: {},
      current: {},
      inUse: [],
    };
    const kept = this.kept.get(k);
    return kept === undefined ? state : { ...state, record: KeyRecord.join(state.record, kept) };
  }
  async mergeRemote(p: KeyPolicy, record: KeyRecord) {
    const k = `${p.tenant}|${p.resource}`;
    this.merges.push({ key: k, record: KeyRecord.copy(record) });
    // As Redis does: the counters are kept (max per entry) and the next read returns them.
    const kept = this.kept.get(k) ?? KeyRecord.initial();
    KeyRecord.mergeInto(kept, { ...KeyRecord.initial(), consumed: record.consumed, denied: record.denied });
    this.kept.set(k, kept);
  }
  async grantLoan(p: KeyPolicy, borrower: string, units: number): Promise<Loan | null> {
    this.grants.push({ key: `${p.tenant}|${p.resource}`, borrower, units });
    return { lender: "us-east", borrower, units, deadlineUs: this.nowUs + 3_000_000, seq: this.nowUs };
  }
  async returnLoan(_p: KeyPolicy, lender: string, seq: number): Promise<ReturnedMark | null> {
    return { lender, borrower: "us-east", seq };
  }
  /** What waitDurable answers (a replica paused: false). */
  durableNow = true;
  waits = 0;
  /** The `since` of each wait (the read's ticket, DESIGN §4 durability certificates). */
  waitedSince: unknown[] = [];
  async waitDurable(_p: KeyPolicy, since?: unknown) {
    this.waits += 1;
    this.waitedSince.push(since);
    return this.durableNow;
  }
  async close() {}
}

class FakeLink {
  sent: Array<{ peer: string; bytes: Uint8Array }> = [];
  send(peer: string, bytes: Uint8Array) {
    this.sent.push({ peer, bytes });
    return true;
  }
  isUp(_peer?: string) {
    return true;
  }
  frames(peer?: string) {
    return this.sent
      .filter((s) => peer === undefined || s.peer === peer)
      .map((s) => {
        const f = decodeFrame(s.bytes);
        if (!f.ok) throw new Error(f.error.message);
        return f.value;
      });
  }
}

function setup(decodeLimits = {}, now?: () => number, digestBuckets?: number) {
  const store = new FakeStore();
  const link = new FakeLink();
  const daemon = new GossipDaemon(
    {
      region: "us-east",
      peers: regions,
      round: { minMs: 200, maxMs: 500 },
      decodeLimits,
      ...(digestBuckets !== undefined ? { digestBuckets } : {}),
    },
    {
      store,
      link,
      policies: { resolve: (t, r) => ({ policy: policy(t, r), regions: quotas }) },
      random: () => 0.5,
      ...(now !== undefined ? { now } : {}),
    },
  );
  return { store, link, daemon };
}

function record(replica: string, admitted: number): KeyRecord {
  const r = KeyRecord.initial();
  r.consumed.p.set(replica, admitted);
  return r;
}

const delta = (from: string, entries: Array<{ key: string; record: KeyRecord }>, version = 1) =>
  encodeFrame({ kind: "delta", from, version, entries });

describe("gossip daemon: bad frames", () => {
  const good = () => delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 5) }]);
  const cases: Array<[string, () => Uint8Array]> = [
    ["random bytes", () => Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 0xff)],
    ["empty frame", () => new Uint8Array(0)],
    ["valid msgpack, wrong shape", () => encode({ kind: "delta", from: "eu-west", entries: "nope" })],
    [
      "wrong protocol version",
      () => {
        const bytes = good();
        const copy = Uint8Array.from(bytes);
        copy[1] = 0x09; // positional frame: [version, kind, ...]; version 9 is unknown
        return copy;
      },
    ],
    ["truncated frame", () => good().slice(0, 10)],
    // A newer release's kind, within version 1 (as the release before this one sees `links`,
    // kind 5: README-protocol.md, "Mixed versions"): dropped, counted, nothing else.
    ["a frame kind from a newer release", () => encode([1, 6, "eu-west", ["ap-south"]])],
    ["forged sender", () => delta("ap-south", [{ key: "t1|r1", record: record("ap-south.a", 5) }])],
  ];
  for (const [name, make] of cases) {
    it(`rejects ${name} without any state change`, async () => {
      const { store, link, daemon } = setup();
      daemon.onFrame("eu-west", make());
      await daemon.round();
      expect(daemon.status().badFrames).toBe(1);
      expect(store.merges).toHaveLength(0);
      expect(daemon.recordOf("t1", "r1")).toBeUndefined();
      expect(link.frames().filter((f) => f.kind === "ack")).toHaveLength(0);
    });
  }

  it("rejects an oversize frame", async () => {
    const { store, daemon } = setup({ frameBytesMax: 64 });
    const entries = Array.from({ length: 20 }, (_, i) => ({
      key: `t${i}|r`,
      record: record("eu-west.a", i + 1),
    }));
    daemon.onFrame("eu-west", delta("eu-west", entries));
    await daemon.round();
    expect(daemon.status().badFrames).toBe(1);
    expect(store.merges).toHaveLength(0);
  });

  it("a bad frame does not disturb the next good one", async () => {
    const { store, daemon } = setup();
    daemon.onFrame("eu-west", new Uint8Array([0xc1, 0xc1, 0xc1]));
    daemon.onFrame("eu-west", good());
    await daemon.round();
    expect(daemon.status().badFrames).toBe(1);
    expect(store.merges.map((m) => m.key)).toEqual(["t1|r1"]);
  });
});

describe("gossip daemon: deltas, acks, rounds", () => {
  it("merges a valid delta into the store and acknowledges it", async () => {
    const { store, link, daemon } = setup();
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 5) }], 7));
    await daemon.round();
    expect(store.merges).toHaveLength(1);
    expect(store.merges[0]!.record.consumed.p.get("eu-west.a")).toBe(5);
    const acks = link.frames("eu-west").filter((f) => f.kind === "ack");
    expect(acks).toEqual([{ kind: "ack", from: "us-east", version: 7 }]);
  });

  it("a duplicated delta changes nothing the second time", async () => {
    const { store, daemon } = setup();
    const bytes = delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 5) }], 3);
    daemon.onFrame("eu-west", bytes);
    await daemon.round();
    daemon.onFrame("eu-west", bytes);
    await daemon.round();
    expect(store.merges).toHaveLength(1);
  });

  it("ships a local change to every peer once, until acknowledged", async () => {
    const { store, link, daemon } = setup();
    store.dirty.push("t1|r1");
    store.states.set("t1|r1", {
      nowUs: 1_000_000,
      recovering: false,
      record: record("us-east.x", 3),
      reserved: {},
      current: {},
      inUse: [],
    });
    // The round sends each peer the full state (a new peer knows nothing, version 0)
    // and the buffered delta; once that is acknowledged, nothing more goes out.
    await daemon.round();
    for (const peer of ["eu-west", "ap-south"]) {
      const deltas = link.frames(peer).filter((f) => f.kind === "delta");
      expect(deltas.map((d) => d.kind === "delta" && d.version > 0)).toEqual([false, true]);
      for (const d of deltas) {
        if (d.kind !== "delta") continue;
        expect(d.entries[0]!.record.consumed.p.get("us-east.x")).toBe(3);
        if (d.version > 0) daemon.onFrame(peer, encodeFrame({ kind: "ack", from: peer, version: d.version }));
      }
    }
    link.sent = [];
    await daemon.round();
    expect(link.frames().filter((f) => f.kind === "delta")).toHaveLength(0);
  });

  it("lends to a region whose demand exceeds its slice", async () => {
    const { store, daemon } = setup();
    // eu-west is hot: its admitted + denied counters grow fast between rounds.
    let t = 1_000_000;
    for (let i = 1; i <= 6; i++) {
      t += 300_000;
      store.nowUs = t;
      const r = KeyRecord.initial();
      r.consumed.p.set("eu-west.a", 100 * i);
      r.denied.set("eu-west.a", 400 * i);
      daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: r }], i));
      await daemon.round();
    }
    const toHot = store.grants.filter((g) => g.borrower === "eu-west");
    expect(toHot.length).toBeGreaterThan(0);
    // Never below the floor, never more than its own base.
    for (const g of toHot) expect(g.units).toBeLessThanOrEqual(333_333 - 20_000);
    expect(store.grants.some((g) => g.borrower === "ap-south")).toBe(false);
  });
});

describe("gossip daemon: unreachable borrowers", () => {
  it("does not lend to a region whose link is down", async () => {
    const { store, link, daemon } = setup();
    let t = 1_000_000;
    const hot = (i: number) => {
      const r = KeyRecord.initial();
      r.consumed.p.set("eu-west.a", 100 * i);
      r.denied.set("eu-west.a", 400 * i);
      return r;
    };
    for (let i = 1; i <= 4; i++) {
      t += 300_000;
      store.nowUs = t;
      daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: hot(i) }], i));
      await daemon.round();
    }
    expect(store.grants.some((g) => g.borrower === "eu-west")).toBe(true);
    // The link to eu-west goes down: no more grants to it, however hot it looked.
    link.isUp = (peer?: string) => peer !== "eu-west";
    const before = store.grants.length;
    for (let i = 0; i < 3; i++) {
      t += 300_000;
      store.nowUs = t;
      await daemon.round();
    }
    expect(store.grants.slice(before).filter((g) => g.borrower === "eu-west")).toEqual([]);
  });
});

describe("gossip daemon: durability before shipping (DESIGN §4)", () => {
  const shippedLoans = (link: FakeLink, peer: string) =>
    link
      .frames(peer)
      .flatMap((f) => (f.kind === "delta" ? f.entries : []))
      .flatMap((e) => [...e.record.loans.values()]);
  const shippedReturns = (link: FakeLink, peer: string) =>
    link
      .frames(peer)
      .flatMap((f) => (f.kind === "delta" ? f.entries : []))
      .flatMap((e) => [...e.record.returned.values()]);

  it("a loan read back from the store ships only after a wait covered it", async () => {
    const { store, link, daemon } = setup();
    // A grant whose own WAIT failed: in the store (every later read returns
    // it), never reported as granted.
    const r = record("us-east.x", 3);
    const loan: Loan = { lender: "us-east", borrower: "eu-west", units: 50_000, deadlineUs: 9e6, seq: 5 };
    r.loans.set("us-east>eu-west", loan);
    const mark: ReturnedMark = { lender: "ap-south", borrower: "us-east", seq: 7 };
    r.returned.set("ap-south>us-east", mark);
    store.states.set("t1|r1", {
      nowUs: 1e6,
      recovering: false,
      record: r,
      reserved: {},
      current: {},
      inUse: [],
    });
    store.dirty.push("t1|r1");
    store.durableNow = false;
    for (let i = 0; i < 3; i++) await daemon.round();
    expect(store.waits).toBe(3);
    // Counters go out, the loan and the return do not.
    expect(link.frames("eu-west").some((f) => f.kind === "delta")).toBe(true);
    expect(shippedLoans(link, "eu-west")).toEqual([]);
    expect(shippedReturns(link, "ap-south")).toEqual([]);
    expect(daemon.recordOf("t1", "r1")?.loans.size).toBe(0);

    store.durableNow = true;
    await daemon.round();
    expect(shippedLoans(link, "eu-west")).toEqual([loan]);
    expect(shippedReturns(link, "ap-south")).toEqual([mark]);
    // Covered once: no more waits for the same seqs.
    await daemon.round();
    expect(store.waits).toBe(4);
  });

  it("the wait that certifies a read is bound to that read's ticket (no reconnect since the read)", async () => {
    const { store, link, daemon } = setup();
    const r = record("us-east.x", 3);
    const loan: Loan = { lender: "us-east", borrower: "eu-west", units: 50_000, deadlineUs: 9e6, seq: 5 };
    r.loans.set("us-east>eu-west", loan);
    const readTicket = { read: "t1|r1", generation: 7 };
    store.states.set("t1|r1", {
      nowUs: 1e6,
      recovering: false,
      record: r,
      reserved: {},
      current: {},
      inUse: [],
      readTicket,
    });
    store.dirty.push("t1|r1");
    await daemon.round();
    expect(store.waitedSince).toEqual([readTicket]);
    // In the full sync of a new peer and in the delta: the one loan, certified.
    expect(new Set(shippedLoans(link, "eu-west").map((l) => JSON.stringify(l)))).toEqual(
      new Set([JSON.stringify(loan)]),
    );
  });

  it("a grant reported durable needs no second wait when read back", async () => {
    const { store, daemon } = setup();
    let t = 1_000_000;
    for (let i = 1; i <= 6; i++) {
      t += 300_000;
      store.nowUs = t;
      const r = KeyRecord.initial();
      r.consumed.p.set("eu-west.a", 100 * i);
      r.denied.set("eu-west.a", 400 * i);
      daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: r }], i));
      await daemon.round();
      // The store returns what it granted in its next reads.
      const last = store.grants.at(-1);
      if (last) {
        const rec = KeyRecord.initial();
        rec.loans.set(`us-east>${last.borrower}`, {
          lender: "us-east",
          borrower: last.borrower,
          units: last.units,
          deadlineUs: t + 3_000_000,
          seq: t,
        });
        store.states.set("t1|r1", {
          nowUs: t,
          recovering: false,
          record: rec,
          reserved: {},
          current: {},
          inUse: [],
        });
      }
    }
    expect(store.grants.length).toBeGreaterThan(0);
    expect(store.waits).toBe(0);
  });
});

describe("gossip daemon: round cadence", () => {
  it("while targets move the next round comes in [fastMs, 2·fastMs]; once settled, in [minMs, maxMs]", async () => {
    const store = new FakeStore();
    const link = new FakeLink();
    const timers: Array<{ fn: () => void; ms: number }> = [];
    const daemon = new GossipDaemon(
      { region: "us-east", peers: regions, round: { minMs: 200, maxMs: 500, fastMs: 40 } },
      {
        store,
        link,
        policies: { resolve: (t, r) => ({ policy: policy(t, r), regions: quotas }) },
        random: () => 0.5,
        timers: {
          setTimeout: (fn, ms) => timers.push({ fn, ms }),
          clearTimeout: () => {},
        },
      },
    );
    // Fires the pending round timer and waits until the round scheduled the next one.
    const fire = async (): Promise<number> => {
      const n = timers.length;
      timers[n - 1]?.fn();
      while (timers.length === n) await new Promise((r) => setImmediate(r));
      return timers[timers.length - 1]?.ms ?? Number.NaN;
    };
    daemon.start();
    expect(timers[0]?.ms).toBe(350); // 200 + 0.5 · (500 − 200)
    const delays: number[] = [];
    let t = 1_000_000;
    // eu-west turns hot: targets move towards it round after round.
    for (let i = 1; i <= 6; i++) {
      t += 300_000;
      store.nowUs = t;
      const r = KeyRecord.initial();
      r.consumed.p.set("eu-west.a", 100 * i);
      r.denied.set("eu-west.a", 400 * i);
      daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: r }], i));
      delays.push(await fire());
    }
    expect(delays).toContain(60); // 40 + 0.5 · 40
    // Then nothing grows: demand decays, targets go back to the bases and settle.
    for (let i = 0; i < 30; i++) {
      t += 300_000;
      store.nowUs = t;
      delays.push(await fire());
    }
    expect(delays.slice(-5)).toEqual([350, 350, 350, 350, 350]);
    expect(delays.filter((d) => d === 60).length).toBeLessThan(delays.length / 2);
    await daemon.stop();
  });
});

describe("gossip daemon: woken by its limiters", () => {
  it("a wake brings the next round to [fastMs, 2·fastMs] from now, at most once per minMs", async () => {
    let nowMs = 0;
    const timers = new Map<number, { fn: () => void; ms: number }>();
    let nextId = 0;
    const daemon = new GossipDaemon(
      { region: "us-east", peers: regions, round: { minMs: 200, maxMs: 500, fastMs: 40 } },
      {
        store: new FakeStore(),
        link: new FakeLink(),
        policies: { resolve: (t, r) => ({ policy: policy(t, r), regions: quotas }) },
        random: () => 0.5,
        now: () => nowMs,
        timers: {
          setTimeout: (fn, ms) => {
            timers.set(++nextId, { fn, ms });
            return nextId;
          },
          clearTimeout: (id) => timers.delete(id as number),
        },
      },
    );
    const pending = () => [...timers.values()].map((t) => t.ms);
    daemon.start();
    expect(pending()).toEqual([350]); // the timer's round: 200 + 0.5 · (500 − 200)
    nowMs = 10;
    daemon.wake();
    expect(pending()).toEqual([60]); // brought forward: 40 + 0.5 · 40 from now
    nowMs = 20;
    daemon.wake(); // within minMs of the last wake: nothing more
    expect(pending()).toEqual([60]);
    // The early round runs; the one after it is the timer's again.
    const [id, t] = [...timers.entries()][0] as [number, { fn: () => void; ms: number }];
    timers.delete(id);
    nowMs = 70;
    t.fn();
    while (timers.size === 0) await new Promise((r) => setImmediate(r));
    expect(pending()).toEqual([350]);
    // A wake past minMs whose round is due soon anyway changes nothing either.
    nowMs = 380;
    daemon.wake();
    expect(pending()).toEqual([350]);
    await daemon.stop();
  });
});

/** Rounds until no delta with entries goes out, every delta acknowledged (full syncs and buffers done). */
async function settle(daemon: GossipDaemon, link: FakeLink): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await daemon.round();
    let any = false;
    for (const peer of ["eu-west", "ap-south"])
      for (const f of link.frames(peer))
        if (f.kind === "delta" && f.entries.length > 0) {
          any = true;
          if (f.version > 0)
            daemon.onFrame(peer, encodeFrame({ kind: "ack", from: peer, version: f.version }));
        }
    link.sent = [];
    if (!any) return;
  }
}

describe("gossip daemon: work follows what changed (issue 24 point 7)", () => {
  it("a full sync goes out 16 frames of 1,000 keys per round, resumed where the socket refused one", async () => {
    const { store, link, daemon } = setup();
    for (let i = 0; i < 40_000; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, {
        nowUs: 1_000_000,
        recovering: false,
        record: record("us-east.x", 1),
        reserved: {},
        current: {},
        inUse: [],
      });
    }
    const fullSync = (peer: string) =>
      link.frames(peer).filter((f) => f.kind === "delta" && f.version === 0).length;
    let refuse = 3; // eu-west's socket takes 3 full-sync frames, then refuses one
    const send = link.send.bind(link);
    link.send = (peer, bytes) => {
      const f = decodeFrame(bytes);
      const syncFrame = f.ok && f.value.kind === "delta" && f.value.version === 0;
      return peer === "eu-west" && syncFrame && refuse-- <= 0 ? false : send(peer, bytes);
    };
    await daemon.round();
    expect(fullSync("eu-west")).toBe(3);
    expect(fullSync("ap-south")).toBe(16);
    link.sent = [];
    refuse = 1_000;
    await daemon.round();
    await daemon.round();
    expect(fullSync("eu-west")).toBe(32);
    expect(fullSync("ap-south")).toBe(24); // 40 frames in all, then done
    link.sent = [];
    await daemon.round();
    expect(fullSync("eu-west")).toBe(5);
    expect(fullSync("ap-south")).toBe(0);
  });

  const reading = (rec: KeyRecord, extra: Partial<KeyReading> = {}): KeyReading => ({
    nowUs: 1_000_000,
    recovering: false,
    record: rec,
    reserved: {},
    current: {},
    inUse: [],
    ...extra,
  });

  it("a key read once, at its bases and without loans, is not read again until it changes; one that lends is read every round", async () => {
    const { store, daemon } = setup();
    for (let i = 0; i < 50; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, reading(record("us-east.x", i + 1)));
    }
    store.states.set("t7|r", reading(record("us-east.x", 8), { reserved: { "eu-west": 50_000 } }));
    await daemon.round();
    expect(store.reads).toHaveLength(50);
    store.reads = [];
    for (let i = 0; i < 3; i++) await daemon.round();
    expect(store.reads).toEqual(["t7|r", "t7|r", "t7|r"]);
    expect(daemon.status().activeKeys).toBe(1);
    // The loan is gone: the key stops being read.
    store.states.set("t7|r", reading(record("us-east.x", 8)));
    store.reads = [];
    for (let i = 0; i < 3; i++) await daemon.round();
    expect(store.reads).toEqual(["t7|r"]);
  });

  it("drains the change feed past one call's budget in the same round", async () => {
    const { store, daemon } = setup();
    for (let i = 0; i < 25_000; i++) store.dirty.push(`t${i}|r`);
    await daemon.round();
    expect(store.dirty).toHaveLength(0);
    expect(store.reads).toHaveLength(25_000);
  });

  it("a key peers changed is read in the next round, not every round after", async () => {
    const { store, daemon } = setup();
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 5) }], 1));
    await daemon.round();
    await daemon.round();
    await daemon.round();
    expect(store.reads).toEqual(["t1|r1"]);
  });

  it("sends again the changes of a frame the peer dropped, though it acked the frames after it", async () => {
    const { store, link, daemon } = setup();
    await settle(daemon, link);
    for (let i = 0; i < 2_500; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, reading(record("us-east.x", 1)));
    }
    await daemon.round();
    const frames = link.frames("eu-west").flatMap((f) => (f.kind === "delta" && f.version > 0 ? [f] : []));
    expect(frames.length).toBe(3);
    const lost = new Set(frames[0]?.entries.map((e) => e.key));
    // eu-west's transport dropped the first (its inbound rate limit); it merged and acked the others.
    for (const f of frames.slice(1))
      daemon.onFrame("eu-west", encodeFrame({ kind: "ack", from: "eu-west", version: f.version }));
    link.sent = [];
    await daemon.round();
    const again = new Set(
      link.frames("eu-west").flatMap((f) => (f.kind === "delta" ? f.entries.map((e) => e.key) : [])),
    );
    expect(lost.size).toBe(1_000);
    expect([...lost].filter((k) => !again.has(k))).toEqual([]);
    // Acked in order this time: nothing is left to send.
    await settle(daemon, link);
    await daemon.round();
    expect(link.frames("eu-west").filter((f) => f.kind === "delta" && f.entries.length > 0)).toEqual([]);
  });

  it("sends a peer more than one frame of changes in a round", async () => {
    const { store, link, daemon } = setup();
    for (let i = 0; i < 2_500; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, reading(record("us-east.x", 1)));
    }
    await settle(daemon, link);
    for (let i = 0; i < 2_500; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, reading(record("us-east.x", 2)));
    }
    await daemon.round();
    const deltas = link.frames("eu-west").filter((f) => f.kind === "delta");
    expect(deltas.length).toBe(3); // 1,000 entries per frame
    expect(deltas.reduce((n, f) => n + (f.kind === "delta" ? f.entries.length : 0), 0)).toBe(2_500);
  });

  it("ships a key's changed counters only, not every replica's it read back", async () => {
    const { store, link, daemon } = setup();
    const whole = KeyRecord.initial();
    for (const id of ["us-east.x", "eu-west.a", "ap-south.b"]) whole.consumed.p.set(id, 10);
    store.states.set("t1|r1", reading(whole));
    store.dirty.push("t1|r1");
    await settle(daemon, link);
    const next = KeyRecord.copy(whole);
    next.consumed.p.set("us-east.x", 11);
    store.states.set("t1|r1", reading(next));
    store.dirty.push("t1|r1");
    await daemon.round();
    const shipped = link
      .frames("eu-west")
      .flatMap((f) => (f.kind === "delta" ? f.entries : []))
      .map((e) => [...e.record.consumed.p]);
    expect(shipped).toEqual([[["us-east.x", 11]]]);
  });

  it("relays what one peer sent only to peers whose links frame says they do not hear it", async () => {
    const { link, daemon } = setup();
    const sent = () => link.frames("ap-south").filter((f) => f.kind === "delta" && f.entries.length > 0);
    await settle(daemon, link); // the full syncs of a start
    // ap-south has not said which links it has: it gets eu-west's change relayed.
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 5) }], 1));
    await daemon.round();
    expect(sent().length).toBeGreaterThan(0);
    await settle(daemon, link);
    // It hears eu-west itself: nothing more is relayed to it.
    daemon.onFrame("ap-south", encodeFrame({ kind: "links", from: "ap-south", up: ["eu-west"] }));
    link.sent = [];
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 6) }], 2));
    await daemon.round();
    expect(sent()).toEqual([]);
    // Its link to eu-west went down: relayed again.
    daemon.onFrame("ap-south", encodeFrame({ kind: "links", from: "ap-south", up: [] }));
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 7) }], 3));
    await daemon.round();
    const relayed = sent().flatMap((f) => (f.kind === "delta" ? f.entries : []));
    expect(relayed.map((e) => e.record.consumed.p.get("eu-west.a"))).toEqual([7]);
    // And every round tells each peer which links this region has.
    expect(link.frames("eu-west").filter((f) => f.kind === "links")).toContainEqual({
      kind: "links",
      from: "us-east",
      up: ["ap-south"],
    });
  });

  it("writes into Redis the counters peers changed, and the whole record when Redis lacks some", async () => {
    const { store, daemon } = setup();
    const first = KeyRecord.initial();
    first.consumed.p.set("eu-west.a", 5);
    first.consumed.p.set("ap-south.b", 9);
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: first }], 1));
    await daemon.round();
    store.states.set("t1|r1", reading(KeyRecord.copy(first)));
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: record("eu-west.a", 6) }], 2));
    await daemon.round();
    expect(store.merges.map((m) => [...m.record.consumed.p])).toEqual([
      [
        ["eu-west.a", 5],
        ["ap-south.b", 9],
      ],
      [["eu-west.a", 6]],
    ]);
    // The key expired in Redis (its counters gone): the next read finds them missing.
    store.states.set("t1|r1", reading(KeyRecord.initial()));
    store.kept.delete("t1|r1");
    store.dirty.push("t1|r1");
    await daemon.round();
    await daemon.round();
    expect([...(store.merges.at(-1)?.record.consumed.p ?? [])]).toEqual([
      ["eu-west.a", 6],
      ["ap-south.b", 9],
    ]);
  });

  it("a digest frame covers at most 2,000 keys: the buckets grow with the map", async () => {
    const { store, link, daemon } = setup({}, undefined, 1);
    for (let i = 0; i < 5_000; i++) {
      store.dirty.push(`t${i}|r`);
      store.states.set(`t${i}|r`, reading(record("us-east.x", 1)));
    }
    for (let i = 0; i < 20; i++) await daemon.round();
    const digests = link.frames("eu-west").filter((f) => f.kind === "digest");
    expect(digests.length).toBe(2);
    for (const d of digests) {
      expect(d.kind === "digest" && d.bucketCount).toBe(4);
      expect(d.kind === "digest" && d.entries.length).toBeLessThanOrEqual(2_000);
    }
  });

  it("forgets the demand estimate of a cold key, keeps a watched key's", async () => {
    let nowMs = 0;
    const { store, daemon } = setup({}, () => nowMs);
    store.states.set("cold|r", reading(record("us-east.x", 1)));
    store.states.set("lent|r", reading(record("us-east.x", 1), { reserved: { "eu-west": 50_000 } }));
    store.dirty.push("cold|r", "lent|r");
    await daemon.round();
    expect(daemon.status().memoryKeys).toBe(2);
    nowMs += 10_000;
    await daemon.round();
    expect(daemon.status().memoryKeys).toBe(1);
  });
});

describe("gossip daemon: woken by its peers", () => {
  /** A daemon on fake timers and a fake clock; `pending()` lists the armed timers' delays. */
  function onFakeTimers() {
    const clock = { nowMs: 0 };
    const timers = new Map<number, { fn: () => void; ms: number }>();
    let nextId = 0;
    const store = new FakeStore();
    // r = 1,000/s: a region's base slice refills 333/s.
    const fast = (t: string, r: string): KeyPolicy => ({
      ...policy(t, r),
      limit: { algorithm: "token_bucket", capacity: 1000, refillPerSecond: 1000 },
    });
    const daemon = new GossipDaemon(
      { region: "us-east", peers: regions, round: { minMs: 200, maxMs: 500, fastMs: 40 } },
      {
        store,
        link: new FakeLink(),
        policies: { resolve: (t, r) => ({ policy: fast(t, r), regions: quotas }) },
        random: () => 0.5,
        now: () => clock.nowMs,
        timers: {
          setTimeout: (fn, ms) => {
            timers.set(++nextId, { fn, ms });
            return nextId;
          },
          clearTimeout: (id) => timers.delete(id as number),
        },
      },
    );
    const pending = () => [...timers.values()].map((t) => t.ms);
    return { clock, store, daemon, pending, timers };
  }

  /** eu-west's counters of t1|r1: `admitted` and `denied` so far. */
  const euWest = (admitted: number, denied: number, version: number) => {
    const r = KeyRecord.initial();
    r.consumed.p.set("eu-west.a", admitted);
    r.denied.set("eu-west.a", denied);
    return delta("eu-west", [{ key: "t1|r1", record: r }], version);
  };

  it("a peer's denials that would move a key's targets bring the next round forward; a trickle does not", async () => {
    const { clock, store, daemon, pending } = onFakeTimers();
    daemon.start();
    // A round knows the key: eu-west well inside its slice.
    daemon.onFrame("eu-west", euWest(1, 0, 1));
    await daemon.round();
    store.nowUs += 300_000;
    clock.nowMs = 10;
    daemon.onFrame("eu-west", euWest(2, 0, 2));
    await daemon.round();
    expect(pending()).toEqual([350]);
    // A trickle of denials: the targets would stay at the bases.
    clock.nowMs = 20;
    daemon.onFrame("eu-west", euWest(2, 1, 3));
    expect(pending()).toEqual([350]);
    // eu-west's demand jumps past its slice: its denials grow by hundreds.
    clock.nowMs = 30;
    daemon.onFrame("eu-west", euWest(100, 300, 4));
    expect(pending()).toEqual([60]); // 40 + 0.5 · 40
    await daemon.stop();
  });

  it("a peer's frame reads only the sender's news: this region's own counters, read at its rounds, are no decay", async () => {
    const { clock, store, daemon, pending } = onFakeTimers();
    daemon.start();
    // us-east itself is hot (600/s against its 333/s slice): its targets are off the bases.
    const own = (admitted: number, at: number) => {
      store.nowUs = 1_000_000 + at * 1000;
      store.states.set("t1|r1", {
        nowUs: store.nowUs,
        recovering: false,
        record: record("us-east.x", admitted),
        reserved: {},
        current: {},
        inUse: [],
      });
      store.dirty.push("t1|r1");
    };
    for (let i = 0; i < 4; i++) {
      own(180 * i, 300 * i);
      await daemon.round();
    }
    // eu-west sends a denial or two: nothing that moves targets, whatever time passed here.
    clock.nowMs = 50;
    daemon.onFrame("eu-west", euWest(1, 1, 1));
    expect(pending()).toEqual([350]);
    await daemon.stop();
  });

  it("a return of a loan this region granted brings the next round forward", async () => {
    const { clock, daemon, pending } = onFakeTimers();
    daemon.start();
    clock.nowMs = 10;
    const r = KeyRecord.initial();
    r.returned.set("us-east>eu-west", { lender: "us-east", borrower: "eu-west", seq: 9 });
    daemon.onFrame("eu-west", delta("eu-west", [{ key: "t1|r1", record: r }], 1));
    expect(pending()).toEqual([60]);
    await daemon.stop();
  });

  it("the limiters' and the peers' wakes each bring at most one round forward per minMs", async () => {
    const { clock, daemon, pending, timers } = onFakeTimers();
    daemon.start();
    clock.nowMs = 10;
    daemon.wake();
    expect(pending()).toEqual([60]);
    // The early round runs; the timer's next one is armed.
    clock.nowMs = 70;
    daemon.wake(); // a second limiter wake within minMs: nothing
    const returned = (seq: number, version: number) => {
      const r = KeyRecord.initial();
      r.returned.set("us-east>eu-west", { lender: "us-east", borrower: "eu-west", seq });
      return delta("eu-west", [{ key: "t1|r1", record: r }], version);
    };
    expect(pending()).toEqual([60]);
    // The early round runs; the timer's next round is armed.
    const [id, t] = [...timers.entries()][0] as [number, { fn: () => void; ms: number }];
    timers.delete(id);
    t.fn();
    while (timers.size === 0) await new Promise((r) => setImmediate(r));
    expect(pending()).toEqual([350]);
    // A peer's wake has a budget of its own: the limiter's wake 60 ms ago does not hold it back.
    clock.nowMs = 80;
    daemon.onFrame("eu-west", returned(9, 1));
    expect(pending()).toEqual([60]);
    // Within minMs of the peer's wake, the next one brings nothing forward.
    for (const [k] of timers) timers.delete(k);
    timers.set(999, { fn: () => {}, ms: 350 });
    clock.nowMs = 100;
    daemon.onFrame("eu-west", returned(10, 2));
    expect(pending()).toEqual([350]);
    await daemon.stop();
  });
});
