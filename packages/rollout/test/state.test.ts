import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ack,
  allAckedTarget,
  compareIds,
  complete,
  compareAcks,
  type DocId,
  decodeSnapshot,
  effectiveDocs,
  encodeSnapshot,
  heardFrom,
  idKey,
  idOf,
  makeDoc,
  mergePeer,
  mergeShared,
  type PolicyDoc,
  peerStateFromWire,
  peerStateToWire,
  peerView,
  phaseOf,
  propose,
  type RegionState,
  resolveUnknown,
  type SharedState,
  seedDoc,
  seedId,
  seedState,
  sharedEquals,
  snapshotOf,
  stateFromSnapshot,
  targetOf,
  unknownState,
  verifyDoc,
} from "../src/index.js";

const REGIONS = ["a", "b", "c"];
const WAIT_US = 3_500_000; // D + 2ε
const STALE_MS = 1000;

/** (version, origin) and a content variant: two variants are two docs with one number. */
const docOf = (version: number, origin: string, variant = 0): PolicyDoc =>
  makeDoc({
    version,
    origin,
    proposedAtMs: variant,
    policies: { default: { capacity: 10 * (version + 1) } },
  });
const docArb = fc
  .record({
    version: fc.integer({ min: 0, max: 4 }),
    origin: fc.constantFrom("a", "b", "c", "seed"),
    variant: fc.integer({ min: 0, max: 1 }),
  })
  .map(({ version, origin, variant }) => docOf(version, origin, variant));
const ackArb = fc.record({
  epoch: fc.integer({ min: 0, max: 2 }),
  id: fc.option(
    fc
      .record({
        version: fc.integer({ min: 0, max: 4 }),
        origin: fc.constantFrom("a", "b", "c"),
        variant: fc.integer({ min: 0, max: 1 }),
      })
      .map(({ version, origin, variant }) => idOf(docOf(version, origin, variant))),
    { nil: null },
  ),
});
/** `version/origin` of an id (the digest makes the full key unreadable in expectations). */
const short = (id: DocId) => `${id.version}/${id.origin}`;
const sharedArb: fc.Arbitrary<SharedState> = fc
  .record({
    docs: fc.array(docArb, { maxLength: 5 }),
    acked: fc.array(fc.tuple(fc.constantFrom(...REGIONS), ackArb), { maxLength: 4 }),
  })
  .map(({ docs, acked }) => {
    const d = new Map<string, PolicyDoc>();
    for (const doc of docs) d.set(idKey(doc), doc);
    const a = new Map<string, { epoch: number; id: DocId | null }>();
    for (const [r, reg] of acked) {
      const m = a.get(r);
      if (m === undefined || compareAcks(reg, m) > 0) a.set(r, reg);
    }
    return { docs: d, acked: a };
  });

describe("merge is a join", () => {
  it("commutative", () => {
    fc.assert(
      fc.property(sharedArb, sharedArb, (x, y) => sharedEquals(mergeShared(x, y), mergeShared(y, x))),
    );
  });
  it("associative", () => {
    fc.assert(
      fc.property(sharedArb, sharedArb, sharedArb, (x, y, z) =>
        sharedEquals(mergeShared(mergeShared(x, y), z), mergeShared(x, mergeShared(y, z))),
      ),
    );
  });
  it("idempotent", () => {
    fc.assert(fc.property(sharedArb, (x) => sharedEquals(mergeShared(x, x), x)));
  });
  it("acks never go down and docs are never lost", () => {
    fc.assert(
      fc.property(sharedArb, sharedArb, (x, y) => {
        const m = mergeShared(x, y);
        for (const [r, reg] of x.acked) expect(compareAcks(m.acked.get(r)!, reg)).toBeGreaterThanOrEqual(0);
        for (const k of x.docs.keys()) expect(m.docs.has(k)).toBe(true);
      }),
    );
  });
});

describe("one id, one content (issue 21)", () => {
  // A proposal (1, a) with content X reached peers; a lost it (failover to an
  // older snapshot, daemon restart) and numbered its next proposal (1, a) again
  // with content Y. Without the digest in the id, b's ack of X counted as an
  // ack of Y, and completing "(1, a)" left b enforcing X and a enforcing Y.
  const x = makeDoc({ version: 1, origin: "a", proposalId: "x", proposedAtMs: 1, policies: POL(20) });
  const y = makeDoc({ version: 1, origin: "a", proposalId: "y", proposedAtMs: 2, policies: POL(30) });
  it("two contents numbered (1, a) are two ids, and both are kept", () => {
    expect(idKey(x)).not.toBe(idKey(y));
    const s1 = { docs: new Map([[idKey(x), x]]), acked: new Map() };
    const s2 = { docs: new Map([[idKey(y), y]]), acked: new Map() };
    expect(mergeShared(s1, s2).docs.size).toBe(2);
  });
  it("an ack of one content never completes the other", () => {
    const lower = compareIds(x, y) < 0 ? x : y;
    const higher = lower === x ? y : x;
    const base = seedState("a", REGIONS, POL(10));
    const acked = new Map(base.shared.acked);
    // b and c acked the lower content; a holds both, its target is the higher one.
    acked.set("a", { epoch: 0, id: idOf(higher) });
    acked.set("b", { epoch: 0, id: idOf(lower) });
    acked.set("c", { epoch: 0, id: idOf(lower) });
    const docs = new Map(base.shared.docs);
    docs.set(idKey(x), x);
    docs.set(idKey(y), y);
    const a: RegionState = { ...base, shared: { docs, acked } };
    expect(targetOf(a)).toEqual(idOf(higher));
    expect(allAckedTarget(a)).toBe(false);
    const later = complete(complete(a, 0, WAIT_US), 10 * WAIT_US, WAIT_US);
    expect(later.completed.version).toBe(0);
    // Both contents are in the meet until the higher one completes.
    expect(effectiveDocs(later).map(idKey)).toEqual([idKey(base.completed), idKey(lower), idKey(higher)]);
  });
  it("a document whose content does not match its digest is named", () => {
    expect(verifyDoc(x)).toBeUndefined();
    expect(verifyDoc({ ...x, policies: POL(30) })).toMatch(/v1@a: digest: .* does not match/);
  });
});

const POL = (c: number) => ({ default: { capacity: c, refillPerSecond: c } });

/** Three seeded regions, a proposal at `a`. */
function proposed(): RegionState[] {
  const regions = REGIONS.map((r) => seedState(r, REGIONS, POL(10)));
  const p = propose(regions[0]!, POL(20), { proposalId: "p1", nowMs: 5 });
  regions[0] = p.state;
  expect(p.doc).toMatchObject({ version: 1, origin: "a", proposalId: "p1" });
  return regions;
}

/** Everyone merges everyone (a healed network). */
function exchange(rs: RegionState[]): RegionState[] {
  const views = rs.map(peerView);
  return rs.map((r) => views.reduce<RegionState>((acc, v) => mergePeer(acc, v), r));
}

const V1: DocId = idOf(
  propose(seedState("a", REGIONS, POL(10)), POL(20), { proposalId: "p1", nowMs: 5 }).doc as PolicyDoc,
);
const SEED: DocId = seedId(POL(10));

describe("proposals", () => {
  it("a proposal equal to the target is a no-op; another gets max known version + 1", () => {
    const s = seedState("b", REGIONS, POL(10));
    expect(propose(s, POL(10), { nowMs: 0 }).doc).toBeNull();
    const p = propose(s, POL(11), { nowMs: 0 });
    expect(p.doc).toMatchObject({ version: 1, origin: "b" });
    expect(propose(p.state, POL(11), { nowMs: 0 }).doc).toBeNull();
    expect(propose(p.state, POL(12), { nowMs: 0 }).doc).toMatchObject({ version: 2, origin: "b" });
  });
  it("the effective docs are the completed one and every newer known one, ascending", () => {
    const rs = exchange(proposed());
    expect(effectiveDocs(rs[2]!).map(short)).toEqual(["0/seed", "1/a"]);
    expect(phaseOf(rs[2]!)).toBe("rolling_out");
  });
});

describe("ack rule", () => {
  it("acks only the target, only limiterStaleMs after a write that contained it", () => {
    const r = exchange(proposed())[1]!;
    expect(ack(r, null, 10_000, STALE_MS)).toBe(r);
    expect(ack(r, { target: SEED, atMs: 0 }, 10_000, STALE_MS)).toBe(r);
    expect(ack(r, { target: V1, atMs: 100 }, 1099, STALE_MS)).toBe(r);
    const acked = ack(r, { target: V1, atMs: 100 }, 1100, STALE_MS);
    expect(acked.shared.acked.get("b")).toEqual({ epoch: 0, id: V1 });
  });
});

/** Acks everywhere (after their writes), then another exchange. */
function ackAll(rs: RegionState[], except: string[] = []): RegionState[] {
  return exchange(
    rs.map((r) =>
      except.includes(r.region) ? r : ack(r, { target: targetOf(r), atMs: 0 }, STALE_MS, STALE_MS),
    ),
  );
}

describe("completion rule", () => {
  it("never before every region acked", () => {
    let rs = ackAll(exchange(proposed()), ["c"]);
    for (const t of [0, WAIT_US, 10 * WAIT_US]) rs = rs.map((r) => complete(r, t, WAIT_US));
    for (const r of rs) expect(r.completed).toEqual(SEED);
    expect(phaseOf(rs[0]!)).toBe("rolling_out");
  });
  it("not before allAckedAt + D + 2ε, then at it", () => {
    const rs = ackAll(exchange(proposed()));
    let a = complete(rs[0]!, 1_000_000, WAIT_US);
    expect(a.allAcked).toEqual({ target: V1, atUs: 1_000_000 });
    expect(phaseOf(a)).toBe("waiting");
    expect(snapshotOf(a, 1, WAIT_US).growAtUs).toBe(1_000_000 + WAIT_US);
    a = complete(a, 1_000_000 + WAIT_US - 1, WAIT_US);
    expect(a.completed.version).toBe(0);
    a = complete(a, 1_000_000 + WAIT_US, WAIT_US);
    expect(a.completed).toEqual(V1);
    expect(effectiveDocs(a).map(short)).toEqual(["1/a"]);
    expect(phaseOf(a)).toBe("stable");
  });
  it("a newer doc learned while waiting restarts the wait, and the superseded doc is never completed", () => {
    let rs = ackAll(exchange(proposed()));
    let b = complete(rs[1]!, 0, WAIT_US);
    // c proposes v2 (c learned v1) before b's wait is over.
    const c = propose(rs[2]!, POL(30), { nowMs: 0 });
    b = mergePeer(b, peerView(c.state));
    b = complete(b, WAIT_US, WAIT_US);
    expect(b.completed.version).toBe(0);
    expect(b.allAcked).toBeNull();
    rs = [rs[0]!, b, c.state];
    rs = ackAll(exchange(rs));
    let done = complete(complete(rs[1]!, 2 * WAIT_US, WAIT_US), 3 * WAIT_US, WAIT_US);
    expect(done.completed).toMatchObject({ version: 2, origin: "c" });
    // v1 went from pending to superseded: pruned, never the completed one.
    expect([...done.shared.docs.values()].map(short)).toEqual(["2/c"]);
    done = complete(done, 10 * WAIT_US, WAIT_US);
    expect(done.completed.version).toBe(2);
  });
});

describe("a region that lost everything", () => {
  const seed = seedDoc(POL(10));
  it("adopts the seed when every peer is unknown too", () => {
    let u = unknownState("a", REGIONS, 7);
    u = heardFrom(u, "b", null);
    expect(resolveUnknown(u, seed)).toBeNull();
    u = heardFrom(u, "c", null);
    expect(resolveUnknown(u, seed)?.completed).toEqual(SEED);
  });
  it("adopts a known peer's docs and completed id only once every peer carries its new epoch", () => {
    let rs = ackAll(exchange(proposed()));
    rs = rs.map((r) => complete(complete(r, 0, WAIT_US), WAIT_US, WAIT_US));
    const b = propose(rs[1]!, POL(5), { nowMs: 0 }).state; // v2 pending at b
    let u = unknownState("a", REGIONS, 9_000_000);
    u = heardFrom(u, "b", peerView(b));
    expect(u.adopted?.completed).toEqual(V1);
    expect(resolveUnknown(u, seed)).toBeNull(); // c not heard
    u = heardFrom(u, "c", peerView(rs[2]!));
    expect(resolveUnknown(u, seed)).toBeNull(); // neither carries a's new epoch
    // They merge what a now sends (its register {epoch, null}) and answer.
    const bb = mergePeer(b, u.adopted!);
    const cc = mergePeer(rs[2]!, u.adopted!);
    expect(bb.shared.acked.get("a")).toEqual({ epoch: 9_000_000, id: null });
    u = heardFrom(heardFrom(u, "b", peerView(bb)), "c", peerView(cc));
    const a = resolveUnknown(u, seed)!;
    expect(a.completed).toEqual(V1);
    expect(effectiveDocs(a).map(short)).toEqual(["1/a", "2/b"]);
  });
  it("an old ack stops counting: no region completes on it", () => {
    // v1 everywhere acked; a loses everything before anyone completes.
    const rs = ackAll(exchange(proposed()));
    let u = unknownState("a", REGIONS, 5);
    u = heardFrom(u, "b", peerView(rs[1]!));
    const b = complete(complete(mergePeer(rs[1]!, u.adopted!), 0, WAIT_US), 2 * WAIT_US, WAIT_US);
    expect(b.completed.version).toBe(0);
  });
  it("steps past an epoch of its own that a peer shows (clock went back)", () => {
    const b = seedState("b", REGIONS, POL(10));
    const u = heardFrom(unknownState("a", REGIONS, 0), "b", peerView(b));
    expect(u.epoch).toBe(1);
    expect(u.adopted?.shared.acked.get("a")).toEqual({ epoch: 1, id: null });
  });
});

describe("snapshot and peer-state codecs", () => {
  it("round-trips a state through the snapshot", () => {
    const rs = ackAll(exchange(proposed()));
    const a = complete(rs[0]!, 42, WAIT_US);
    const raw = encodeSnapshot(snapshotOf(a, 3, WAIT_US));
    const d = decodeSnapshot(raw);
    if (!d.ok) throw new Error(d.error);
    expect(d.value).toMatchObject({ seq: 3, phase: "waiting", allAckedAtUs: 42, target: V1 });
    const back = stateFromSnapshot(d.value, REGIONS);
    if (!back.ok) throw new Error(back.error);
    expect(back.value.allAcked).toEqual({ target: V1, atUs: 42 });
    expect(sharedEquals(back.value.shared, a.shared)).toBe(true);
  });
  it("a bad snapshot is an error naming the field", () => {
    const s = snapshotOf(seedState("a", REGIONS, POL(1)), 1, 0);
    expect(decodeSnapshot("{")).toMatchObject({ ok: false, error: expect.stringContaining("not JSON") });
    const bad = (patch: object) => decodeSnapshot(JSON.stringify({ ...s, ...patch }));
    expect(bad({ seq: -1 })).toMatchObject({ ok: false, error: expect.stringContaining("seq:") });
    expect(bad({ docs: [{ ...s.docs[0], version: "x" }] })).toMatchObject({
      ok: false,
      error: expect.stringContaining("docs[0].version"),
    });
    expect(bad({ target: { version: 3, origin: "a", digest: "0".repeat(32) } })).toMatchObject({
      ok: false,
      error: expect.stringContaining("target:"),
    });
    expect(bad({ phase: "growing" })).toMatchObject({ ok: false, error: expect.stringContaining("phase:") });
  });
  it("a peer state round-trips, and a bad one is an error naming the field", () => {
    const a = exchange(proposed())[0]!;
    const back = peerStateFromWire(JSON.parse(JSON.stringify(peerStateToWire(peerView(a)))));
    if (!back.ok) throw new Error(back.error);
    expect(sharedEquals(back.value.shared, peerView(a).shared)).toBe(true);
    const w = peerStateToWire(peerView(a));
    expect(peerStateFromWire({ ...w, acked: { b: { epoch: -1, id: null } } })).toMatchObject({
      ok: false,
      error: expect.stringContaining("acked.b.epoch"),
    });
    expect(peerStateFromWire({ ...w, docs: [] })).toMatchObject({
      ok: false,
      error: expect.stringContaining("completed"),
    });
    expect(peerStateFromWire(null)).toMatchObject({ ok: false });
  });
});
