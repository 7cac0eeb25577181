// The daemon's rollout step through the real GossipDaemon: frames carry the
// state, a proposal becomes a version, shrinking applies at once, acks wait
// limiterStaleMs after the durable write, growth waits for every ack and
// D + 2ε of Redis TIME, a wiped snapshot is rewritten from memory, a region
// that lost everything enforces nothing until every peer carries its new
// epoch, bad frames and bad proposals are refused naming the field.
import { KeyRecord } from "@geoquota/crdt";
import { parsePolicies } from "@geoquota/config";
import {
  decodeProposal,
  decodeSnapshot,
  encodeSnapshot,
  type Proposal,
  type Snapshot,
  seedId,
  seedState,
  snapshotOf,
} from "@geoquota/rollout";
import { describe, expect, it } from "vitest";
import {
  type DaemonStore,
  GossipDaemon,
  type RolloutPort,
  RolloutStep,
  rolloutPolicyResolver,
} from "../src/index.js";

const IDS = ["a", "b", "c"];
const STALE_MS = 1000;
const WAIT_US = 3_500_000;
const MARGIN_US = 200_000;
const pol = (c: number, r = c) => ({ default: { capacity: c, refillPerSecond: r } });

const emptyStore: DaemonStore = {
  drainDirty: async () => [],
  sweepKeys: async () => ({ cursor: "0", keys: [] }),
  readKey: async () => ({
    nowUs: 0,
    recovering: false,
    record: KeyRecord.initial(),
    reserved: {},
    current: {},
    inUse: [],
  }),
  mergeRemote: async () => {},
  grantLoan: async () => null,
  returnLoan: async () => null,
  waitDurable: async () => true,
  close: async () => {},
};

class MemPort implements RolloutPort {
  raw: string | null = null;
  proposals: string[] = [];
  durable = true;
  writes = 0;
  constructor(private readonly clock: { us: number }) {}
  async readSnapshotRaw() {
    return this.raw;
  }
  async writeSnapshot(raw: string) {
    this.raw = raw;
    this.writes++;
    return this.durable;
  }
  async popProposals(max: number) {
    return this.proposals.splice(0, max).map(decodeProposal);
  }
  async timeUs() {
    return this.clock.us;
  }
  push(p: Proposal) {
    this.proposals.push(JSON.stringify(p));
  }
  snapshot(): Snapshot {
    const d = decodeSnapshot(this.raw ?? "null");
    if (!d.ok) throw new Error(d.error);
    return d.value;
  }
}

function cluster(seeded = true) {
  const clock = { us: 1_000_000_000 };
  const queue: Array<{ from: string; to: string; bytes: Uint8Array }> = [];
  const cut = new Set<string>();
  const logs: string[] = [];
  const errors: string[] = [];
  const nodes = IDS.map((id) => {
    const port = new MemPort(clock);
    if (seeded) port.raw = encodeSnapshot(snapshotOf(seedState(id, IDS, pol(10)), 1, 0));
    return {
      id,
      port,
      step: undefined as unknown as RolloutStep,
      daemon: undefined as unknown as GossipDaemon,
    };
  });
  const start = (n: (typeof nodes)[number]) => {
    n.step = new RolloutStep(
      {
        region: n.id,
        regions: IDS,
        limiterStaleMs: STALE_MS,
        waitUs: WAIT_US,
        windowMarginUs: MARGIN_US,
        seedPolicies: () => pol(10),
        parse: (raw, label) => parsePolicies(raw, label, IDS),
        now: () => clock.us / 1000,
        log: (_l, event, fields) => logs.push(`${n.id} ${event} ${JSON.stringify(fields)}`),
      },
      n.port,
    );
    n.daemon = new GossipDaemon(
      { region: n.id, peers: IDS, round: { minMs: 100, maxMs: 100 } },
      {
        store: emptyStore,
        link: {
          send: (peer, bytes) => {
            if (cut.has(n.id) || cut.has(peer)) return false;
            queue.push({ from: n.id, to: peer, bytes });
            return true;
          },
          isUp: (peer) => !cut.has(n.id) && !cut.has(peer),
        },
        policies: rolloutPolicyResolver(n.step, { region: n.id, regions: IDS }),
        rollout: n.step,
        now: () => clock.us / 1000,
        onError: (where, err) => errors.push(`${n.id} ${where}: ${(err as Error).message}`),
      },
    );
  };
  for (const n of nodes) start(n);
  const deliver = () => {
    for (const m of queue.splice(0)) nodes.find((x) => x.id === m.to)?.daemon.onFrame(m.from, m.bytes);
  };
  /** Every daemon runs a round, then every frame is delivered. */
  const rounds = async (k = 1, advanceMs = 100) => {
    for (let i = 0; i < k; i++) {
      for (const n of nodes) await n.daemon.round();
      deliver();
      clock.us += advanceMs * 1000;
    }
  };
  const node = (id: string) => nodes.find((x) => x.id === id)!;
  return { clock, nodes, node, rounds, deliver, start, cut, logs, errors, queue };
}

const capacityAt = (step: RolloutStep, id: string) =>
  rolloutPolicyResolver(step, { region: id, regions: IDS }).resolve("t", "r").policy.limit.capacity;

describe("the rollout through the daemon", () => {
  it("a raise rolls out: everyone learns, acks after limiterStaleMs, grows after every ack + D + 2ε", async () => {
    const c = cluster();
    await c.rounds(1);
    for (const n of c.nodes) expect(n.step.status()).toMatchObject({ known: true, phase: "stable" });
    c.node("a").port.push({ proposalId: "p1", policies: pol(20), at: 1 });
    await c.rounds(2);
    for (const n of c.nodes) {
      expect(n.step.status()).toMatchObject({ target: { version: 1, origin: "a" }, phase: "rolling_out" });
      expect(n.port.snapshot().docs.map((d) => d.version)).toEqual([0, 1]);
      // Nothing grows yet: the meet of v0 (10) and v1 (20).
      expect(capacityAt(n.step, n.id)).toBe(10);
    }
    expect(c.logs.some((l) => l.startsWith("a policy_proposed"))).toBe(true);
    // Acks only once limiterStaleMs has passed since the write.
    expect(c.node("b").step.status().acked.b?.id?.version).toBe(0);
    await c.rounds(12); // 1.2 s
    for (const n of c.nodes) expect(n.step.status().phase).toBe("waiting");
    const growAt = c.node("b").port.snapshot().growAtUs!;
    expect(growAt - c.node("b").port.snapshot().allAckedAtUs!).toBe(WAIT_US);
    while (c.clock.us < growAt - 200_000) await c.rounds(1);
    expect(capacityAt(c.node("b").step, "b")).toBe(10);
    await c.rounds(10);
    for (const n of c.nodes) {
      expect(n.step.status()).toMatchObject({ phase: "stable", completed: { version: 1, origin: "a" } });
      expect(capacityAt(n.step, n.id)).toBe(20);
      expect(n.port.snapshot().docs.map((d) => d.version)).toEqual([1]);
    }
    expect(c.errors).toEqual([]);
  });

  it("a change of a window-algorithm key grows one window W + 2ε later; other changes do not wait for it", async () => {
    const c = cluster();
    await c.rounds(1);
    const windowed = (weights: Record<string, number>, capacity = 10) => ({
      ...pol(capacity),
      policies: [
        { tenant: "w", resource: "api", algorithm: "fixed_window", capacity: 100, windowMs: 2000, weights },
      ],
    });
    const growWait = async (proposalId: string, policies: unknown) => {
      c.node("a").port.push({ proposalId, policies, at: 1 });
      while (c.node("b").port.snapshot().phase !== "waiting") await c.rounds(1);
      const snap = c.node("b").port.snapshot();
      const wait = (snap.growAtUs as number) - (snap.allAckedAtUs as number);
      while (c.node("b").port.snapshot().phase !== "stable") await c.rounds(1);
      return wait;
    };
    // The key w/api goes from the default token bucket to a fixed window: its window + 2ε more.
    expect(await growWait("p1", windowed({ a: 3, b: 1, c: 1 }))).toBe(WAIT_US + 2_000_000 + MARGIN_US);
    // Re-weighting the window key (bases move mid-window otherwise): the same.
    expect(await growWait("p2", windowed({ a: 1, b: 3, c: 1 }))).toBe(WAIT_US + 2_000_000 + MARGIN_US);
    // A token-bucket raise with the window key as it was: D + 2ε only.
    expect(await growWait("p3", windowed({ a: 1, b: 3, c: 1 }, 20))).toBe(WAIT_US);
    expect(c.errors).toEqual([]);
  });

  it("a shrink applies at once; a partitioned region delays growth, never safety", async () => {
    const c = cluster();
    await c.rounds(1);
    c.cut.add("c");
    c.node("a").port.push({ proposalId: "p1", policies: pol(5), at: 1 });
    await c.rounds(1);
    expect(capacityAt(c.node("a").step, "a")).toBe(5);
    await c.rounds(60); // 6 s: a and b acked, c never heard
    for (const id of ["a", "b"]) expect(c.node(id).step.status()).toMatchObject({ phase: "rolling_out" });
    expect(capacityAt(c.node("c").step, "c")).toBe(10);
    c.cut.clear();
    for (const n of c.nodes) for (const p of IDS) if (p !== n.id) n.daemon.peerUp(p);
    await c.rounds(60);
    for (const n of c.nodes)
      expect(n.step.status()).toMatchObject({ phase: "stable", completed: { version: 1 } });
  });

  it("a wiped snapshot is rewritten from memory; an undurable write is retried and acks nothing", async () => {
    const c = cluster();
    await c.rounds(1);
    const a = c.node("a");
    a.port.raw = null;
    await c.rounds(1);
    expect(a.port.snapshot().completed).toEqual(seedId(pol(10)));
    expect(c.logs.some((l) => l.startsWith("a policy_snapshot_rewritten"))).toBe(true);
    a.port.durable = false;
    a.port.push({ proposalId: "p1", policies: pol(20), at: 1 });
    await c.rounds(30);
    expect(a.step.status().acked.a?.id?.version).toBe(0);
    const writes = a.port.writes;
    await c.rounds(2);
    expect(a.port.writes).toBeGreaterThan(writes);
    a.port.durable = true;
    await c.rounds(12);
    expect(a.step.status().acked.a?.id?.version).toBe(1);
  });

  it("a region that lost everything enforces nothing until every peer carries its new epoch", async () => {
    const c = cluster();
    await c.rounds(1);
    c.node("a").port.push({ proposalId: "p1", policies: pol(20), at: 1 });
    await c.rounds(15);
    const cc = c.node("c");
    cc.port.raw = null;
    c.cut.add("b"); // b does not hear c's new epoch
    c.start(cc);
    await c.rounds(60); // 6 s: longer than every ack + D + 2ε
    expect(cc.step.status().known).toBe(false);
    expect(cc.port.raw).toBeNull();
    expect(() => capacityAt(cc.step, "c")).toThrow(/policy unknown/);
    // Its old ack no longer counts where its new epoch arrived: a does not complete v1
    // (b, cut off with c's old ack, may: c enforces nothing until it has b's state).
    expect(c.node("a").step.status().completed?.version).toBe(0);
    c.cut.clear();
    await c.rounds(3);
    expect(cc.step.status()).toMatchObject({ known: true, target: { version: 1 } });
    expect(cc.port.snapshot().target.version).toBe(1);
    await c.rounds(60);
    for (const n of c.nodes) expect(n.step.status()).toMatchObject({ completed: { version: 1 } });
  });

  it("a fresh cluster with no snapshots adopts the seed once every peer says it is unknown", async () => {
    const c = cluster(false);
    await c.rounds(1);
    await c.rounds(1);
    for (const n of c.nodes) {
      expect(n.step.status()).toMatchObject({ known: true, completed: { version: 0, origin: "seed" } });
      expect(n.port.snapshot().docs[0]?.policies).toEqual(pol(10));
    }
  });

  it("bad frames and bad proposals are refused, naming the field", async () => {
    const c = cluster();
    await c.rounds(1);
    const b = c.node("b");
    const good = c.node("a").step.outgoingFrame()!;
    b.daemon.onFrame("a", Uint8Array.from([0x94, 0x01, 0x10, 0xc1]));
    b.daemon.onFrame("c", good); // claims to be from a
    expect(b.daemon.status().badFrames).toBe(2);
    expect(c.errors.join("\n")).toMatch(/FORGED|msgpack/);
    c.node("a").port.push({
      proposalId: "bad",
      policies: { default: { capacity: -1, refillPerSecond: 1 } },
      at: 1,
    });
    c.node("a").port.proposals.push("{nope");
    await c.rounds(1);
    expect(c.logs.join("\n")).toMatch(/a policy_proposal_refused .*default\.capacity/);
    expect(c.logs.join("\n")).toMatch(/a policy_proposal_refused .*not JSON/);
    expect(c.node("a").step.status().target?.version).toBe(0);
  });
});
