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
  async readKey(p: KeyPolicy): Promise<KeyReading> {
    const k = `${p.tenant}|${p.resource}`;
    return (
      this.states.get(k) ?? {
        nowUs: this.nowUs,
        recovering: false,
        record: KeyRecord.initial(),
        reserved: {},
        current: {},
        inUse: [],
      }
    );
  }
  async mergeRemote(p: KeyPolicy, record: KeyRecord) {
    this.merges.push({ key: `${p.tenant}|${p.resource}`, record: KeyRecord.copy(record) });
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

function setup(decodeLimits = {}) {
  const store = new FakeStore();
  const link = new FakeLink();
  const daemon = new GossipDaemon(
    { region: "us-east", peers: regions, round: { minMs: 200, maxMs: 500 }, decodeLimits },
    {
      store,
      link,
      policies: { resolve: (t, r) => ({ policy: policy(t, r), regions: quotas }) },
      random: () => 0.5,
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
    // Round 1 sends each peer the full state (a new peer knows nothing), round 2
    // the buffered delta; once acknowledged, nothing more goes out.
    for (let round = 0; round < 2; round++) {
      await daemon.round();
      for (const peer of ["eu-west", "ap-south"]) {
        const deltas = link.frames(peer).filter((f) => f.kind === "delta");
        expect(deltas.length).toBeGreaterThanOrEqual(1);
        for (const d of deltas) {
          if (d.kind !== "delta") continue;
          expect(d.entries[0]!.record.consumed.p.get("us-east.x")).toBe(3);
          if (d.version > 0)
            daemon.onFrame(peer, encodeFrame({ kind: "ack", from: peer, version: d.version }));
        }
      }
      link.sent = [];
    }
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
    expect(shippedLoans(link, "eu-west")).toEqual([loan]);
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
