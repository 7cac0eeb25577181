// Per-entry edits (issue 22, DESIGN §3): concurrent edits of different entries
// made in different regions all survive the merge; an edit of the same entry
// resolves to the highest stamp in every region alike; a region never acks a
// target that lacks an edit it knows.
import { describe, expect, it } from "vitest";
import {
  ack,
  adopt,
  compareIds,
  type Edit,
  mergeParts,
  mergePeer,
  partsOf,
  type PolicyDoc,
  peerView,
  propose,
  proposeMerge,
  type RegionState,
  seedState,
  targetDoc,
  targetOf,
  unreflected,
} from "../src/index.js";

const REGIONS = ["a", "b", "c"];
const SEED = { default: { capacity: 10, refillPerSecond: 10 }, policies: [] };
const entry = (tenant: string, capacity: number | null): Edit => ({
  kind: "entry",
  tenant,
  resource: "api",
  spec: capacity === null ? null : { capacity, refillPerSecond: 1 },
});

function edit(r: RegionState, e: Edit, proposalId: string): RegionState {
  const out = propose(r, undefined, { proposalId, nowMs: 0, edit: e });
  if (out.doc === null) throw new Error("unchanged");
  return out.state;
}

/** Everyone merges everyone, then every region proposes the merge it sees; until nothing changes. */
function settle(rs: RegionState[]): RegionState[] {
  for (let i = 0; i < 10; i++) {
    const views = rs.map(peerView);
    rs = rs.map((r) => views.reduce<RegionState>((acc, v) => mergePeer(acc, v), r));
    let changed = false;
    rs = rs.map((r) => {
      const m = proposeMerge(r, 0);
      if (m === null) return r;
      changed = true;
      return adopt(r, m.merged);
    });
    if (!changed) {
      const ids = rs.map((r) => JSON.stringify(targetOf(r)));
      if (new Set(ids).size === 1) return rs;
    }
  }
  throw new Error("did not settle");
}

const entriesOf = (d: PolicyDoc) =>
  [...partsOf(d.policies).entries()].filter(([k]) => k.startsWith("policies:")).map(([, v]) => v);

describe("per-entry edits", () => {
  it("concurrent edits of different entries in different regions all survive", () => {
    let rs = REGIONS.map((r) => seedState(r, REGIONS, SEED));
    rs = rs.map((r, i) => edit(r, entry(`cust_${r.region}`, 5 + i), `p-${r.region}`));
    rs = settle(rs);
    for (const r of rs) {
      expect(unreflected(r)).toEqual([]);
      expect(entriesOf(targetDoc(r))).toEqual([
        { tenant: "cust_a", resource: "api", capacity: 5, refillPerSecond: 1 },
        { tenant: "cust_b", resource: "api", capacity: 6, refillPerSecond: 1 },
        { tenant: "cust_c", resource: "api", capacity: 7, refillPerSecond: 1 },
      ]);
    }
  });

  it("an edit of the same entry resolves to the highest stamp, alike everywhere; the other side's stamp shows it lost", () => {
    let rs = REGIONS.map((r) => seedState(r, REGIONS, SEED));
    rs[0] = edit(rs[0]!, entry("cust_x", 1), "from-a");
    rs[1] = edit(rs[1]!, entry("cust_x", 2), "from-b");
    rs = settle(rs);
    for (const r of rs) {
      const t = targetDoc(r);
      expect(entriesOf(t)).toEqual([{ tenant: "cust_x", resource: "api", capacity: 2, refillPerSecond: 1 }]);
      expect(t.stamps?.["policies:cust_x/api"]).toEqual({ v: 1, o: "b", p: "from-b" });
    }
  });

  it("a removal is an edit like another; a later set of the entry wins over it", () => {
    let rs = REGIONS.map((r) => seedState(r, REGIONS, SEED));
    rs[0] = edit(rs[0]!, entry("cust_x", 1), "set");
    rs = settle(rs);
    rs[1] = edit(rs[1]!, entry("cust_x", null), "remove");
    rs[2] = edit(rs[2]!, entry("cust_y", 3), "other");
    rs = settle(rs);
    for (const r of rs)
      expect(entriesOf(targetDoc(r)).map((e) => (e as { tenant: string }).tenant)).toEqual(["cust_y"]);
  });

  it("a whole document stamps only the parts it changes, so it merges with a concurrent entry edit", () => {
    let rs = REGIONS.map((r) => seedState(r, REGIONS, SEED));
    rs[0] = propose(rs[0]!, { ...SEED, default: { capacity: 20, refillPerSecond: 20 } }, { nowMs: 0 }).state;
    rs[1] = edit(rs[1]!, entry("cust_b", 4), "p-b");
    rs = settle(rs);
    for (const r of rs) {
      const t = targetDoc(r).policies as { default: { capacity: number } };
      expect(t.default.capacity).toBe(20);
      expect(entriesOf(targetDoc(r))).toHaveLength(1);
    }
  });

  it("the merge does not depend on the order of the documents", () => {
    const rs = REGIONS.map((r) => seedState(r, REGIONS, SEED));
    rs[0] = edit(rs[0]!, entry("cust_x", 1), "x1");
    rs[1] = edit(edit(rs[1]!, entry("cust_x", 2), "x2"), entry("cust_y", 2), "y2");
    rs[2] = edit(rs[2]!, entry("cust_y", 3), "y3");
    const docs = rs.map(targetDoc);
    const one = mergeParts(docs);
    for (const order of [
      [2, 1, 0],
      [1, 0, 2],
      [0, 2, 1],
    ]) {
      const other = mergeParts(order.map((i) => docs[i]!));
      expect(other).toEqual(one);
    }
  });

  it("a region never acks a target that lacks an edit it knows", () => {
    const a = edit(seedState("a", REGIONS, SEED), entry("cust_a", 1), "p-a");
    let b = edit(seedState("b", REGIONS, SEED), entry("cust_b", 1), "p-b");
    b = mergePeer(b, peerView(a));
    // (1, b) > (1, a): b's target lacks a's edit.
    expect(compareIds(targetOf(b), targetOf(a))).toBeGreaterThan(0);
    expect(unreflected(b).length).toBe(1);
    const same = ack(b, { target: targetOf(b), atMs: 0 }, 10_000, 1000);
    expect(same.shared.acked.get("b")?.id?.version).toBe(0);
  });
});
