// Property tests of "process leases pin share" (DESIGN §3) and recovery with
// leased mode (DESIGN §4) on the model: two regions lend, borrow, return,
// lease, release, check and lose their state in any order; the tokens their
// clients hold (including leases a wiped Redis forgot) stay backed by share at
// every instant. Exact integer form of DESIGN's global check:
//   Σ_i max(C·s_i(t), U·leased_i(t)) ≤ C·U
// at now and at every later change point of either region's schedule (shares
// and leases are piecewise constant between them). Bucket tokens never exceed
// C·s/U − leased (settle clamps each piece: bucket.property.test.ts), so this
// bounds Σ max(capacity of the applied share, leased + bucket) by C.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  acquireLease,
  check,
  emptyKeyState,
  ensureMarker,
  freshIncarnation,
  grantLoan,
  type KeyLimit,
  type KeyState,
  type LeaseHold,
  leaseBreakpoints,
  mergeRemote,
  outstandingAt,
  pinExcess,
  type RegionState,
  receiveReturn,
  releaseLease,
  returnLoan,
  SHARE_UNITS,
  shareAt,
  shareBreakpoints,
  shareInputs,
  type Timing,
} from "../src/index.js";

const TIMING: Timing = { epsilonUs: 50_000, loanDurationUs: 3_000_000, leasedMode: true };
const LIMIT: KeyLimit = {
  algorithm: "token_bucket",
  capacity: 100,
  refillPerSecond: 100,
  baseShare: 500_000,
  floorShare: 20_000,
};
const NAMES = ["a", "b"] as const;

interface Side {
  readonly name: string;
  readonly region: RegionState;
  key: KeyState;
  /** Leases its clients still hold that a state loss made the region forget. */
  ghosts: LeaseHold[];
  /** A return made as borrower, not yet delivered to the lender. */
  pendingReturn: number;
  leaseIds: string[];
}

const at = fc.constantFrom(0, 1);
const op = fc.oneof(
  fc.record({
    kind: fc.constant("grant" as const),
    at,
    units: fc.integer({ min: 1, max: 500_000 }),
    durUs: fc.integer({ min: 100_000, max: 4_000_000 }),
  }),
  fc.record({ kind: fc.constant("deliver" as const), at }),
  fc.record({ kind: fc.constant("return" as const), at }),
  fc.record({ kind: fc.constant("deliverReturn" as const), at }),
  fc.record({
    kind: fc.constant("lease" as const),
    at,
    tokens: fc.integer({ min: 1, max: 100 }),
    durUs: fc.integer({ min: 10_000, max: 3_500_000 }),
  }),
  fc.record({ kind: fc.constant("release" as const), at, used: fc.integer({ min: 0, max: 100 }) }),
  fc.record({ kind: fc.constant("check" as const), at, cost: fc.integer({ min: 0, max: 20 }) }),
  fc.record({ kind: fc.constant("loss" as const), at }),
  // Borrow, let the bucket fill, lease much of it, then return / lend / nothing (where pins bind).
  fc.record({
    kind: fc.constant("borrowLease" as const),
    at,
    units: fc.integer({ min: 100_000, max: 480_000 }),
    tokens: fc.integer({ min: 30, max: 98 }),
    durUs: fc.integer({ min: 500_000, max: 3_000_000 }),
    after: fc.constantFrom("return", "lend", "none"),
  }),
);
const step = fc.record({ op, dtUs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1_500_000 })) });

function leasesOf(s: Side): LeaseHold[] {
  return [...s.key.leases.values(), ...s.ghosts];
}

function shareOf(s: Side, t: number): number {
  const marker = s.region.marker;
  if (marker === undefined) return 0;
  return shareAt(shareInputs(s.key, LIMIT, TIMING, marker), t);
}

/** Largest Σ_i max(C·s_i, U·leased_i) − C·U over now and every later change point. */
function worstExcess(sides: readonly Side[], nowUs: number): number {
  const points = new Set<number>([nowUs]);
  for (const s of sides) {
    for (const t of leaseBreakpoints(leasesOf(s), nowUs)) points.add(t);
    const marker = s.region.marker;
    if (marker !== undefined) {
      for (const t of shareBreakpoints(shareInputs(s.key, LIMIT, TIMING, marker), nowUs)) points.add(t);
    }
  }
  let worst = Number.NEGATIVE_INFINITY;
  for (const t of points) {
    let sum = 0;
    for (const s of sides) {
      sum += Math.max(LIMIT.capacity * shareOf(s, t), SHARE_UNITS * outstandingAt(leasesOf(s), t));
    }
    worst = Math.max(worst, sum - LIMIT.capacity * SHARE_UNITS);
  }
  return worst;
}

function run(macroSteps: readonly { op: Op; dtUs: number }[]) {
  const steps = macroSteps.flatMap(expand);
  let now = 10_000_000;
  const sides: Side[] = NAMES.map((name) => ({
    name,
    region: { region: name, marker: freshIncarnation(0) },
    key: emptyKeyState(),
    ghosts: [],
    pendingReturn: 0,
    leaseIds: [],
  }));
  let leaseSeq = 0;
  const stats = { leasedRefusals: 0, pinnedReturns: 0, cappedLeases: 0, losses: 0 };
  for (const { op: o, dtUs } of steps) {
    now += dtUs;
    const me = sides[o.at] as Side;
    const other = sides[1 - o.at] as Side;
    switch (o.kind) {
      case "grant": {
        const g = grantLoan(me.region, me.name, me.key, LIMIT, TIMING, other.name, o.units, o.durUs, now);
        if (!g.ok && g.reason === "leased") stats.leasedRefusals++;
        break;
      }
      case "deliver": {
        const loan = other.key.book.granted.get(me.name);
        if (loan !== undefined) {
          mergeRemote(
            me.region,
            me.name,
            me.key,
            LIMIT,
            TIMING,
            [{ lender: other.name, loan }],
            new Map(),
            now,
          );
        }
        break;
      }
      case "return": {
        const r = returnLoan(me.region, me.key, LIMIT, TIMING, other.name, now);
        if (r.pinned) stats.pinnedReturns++;
        if (r.seq > 0) me.pendingReturn = r.seq;
        break;
      }
      case "deliverReturn": {
        if (other.pendingReturn > 0) {
          receiveReturn(me.region, me.key, LIMIT, TIMING, other.name, other.pendingReturn, now);
          other.pendingReturn = 0;
        }
        break;
      }
      case "lease": {
        const id = `l${leaseSeq++}`;
        const l = acquireLease(me.region, me.key, LIMIT, TIMING, id, o.tokens, o.durUs, now);
        if (l.granted > 0) me.leaseIds.push(id);
        if (l.granted > 0 && l.expiryUs < now + Math.min(o.durUs, TIMING.loanDurationUs))
          stats.cappedLeases++;
        break;
      }
      case "release": {
        const id = me.leaseIds.shift();
        if (id !== undefined) releaseLease(me.region, me.key, LIMIT, TIMING, id, o.used, now);
        break;
      }
      case "check":
        check(me.region, me.key, LIMIT, TIMING, o.cost, now);
        break;
      case "loss": {
        // Redis forgets everything; the clients keep what they were granted.
        me.ghosts = [...leasesOf(me)].filter((l) => l.expiryUs > now);
        me.key = emptyKeyState();
        me.leaseIds = [];
        me.pendingReturn = 0;
        me.region.marker = undefined;
        ensureMarker(me.region, now); // detected now: a new incarnation, in recovery
        stats.losses++;
        break;
      }
    }
    const excess = worstExcess(sides, now);
    if (excess > 0) return { ok: false as const, excess, now, stats };
  }
  return { ok: true as const, stats };
}

type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;
type Basic = Exclude<Op, { kind: "borrowLease" }>;

/** The macro as the basic steps it stands for. */
function expand(s: { op: Op; dtUs: number }): { op: Basic; dtUs: number }[] {
  const o = s.op;
  if (o.kind !== "borrowLease") return [{ op: o, dtUs: s.dtUs }];
  const lender = o.at === 0 ? 1 : 0;
  const out: { op: Basic; dtUs: number }[] = [
    { op: { kind: "grant", at: lender, units: o.units, durUs: 3_000_000 }, dtUs: s.dtUs },
    { op: { kind: "deliver", at: o.at }, dtUs: 0 },
    { op: { kind: "lease", at: o.at, tokens: o.tokens, durUs: o.durUs }, dtUs: 600_000 },
  ];
  if (o.after === "return") out.push({ op: { kind: "return", at: o.at }, dtUs: 0 });
  if (o.after === "lend")
    out.push({ op: { kind: "grant", at: o.at, units: o.units, durUs: 3_000_000 }, dtUs: 0 });
  return out;
}

describe("process leases pin share (model)", () => {
  it("Σ max(C·s_i, U·leased_i) ≤ C·U at every instant after any sequence (leases forgotten by a state loss included)", () => {
    const total = { leasedRefusals: 0, pinnedReturns: 0, cappedLeases: 0, losses: 0 };
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), (steps) => {
        const r = run(steps);
        for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += r.stats[k];
        expect(r).toMatchObject({ ok: true });
      }),
      { numRuns: 400 },
    );
    // The rules did bind in the generated sequences.
    expect(total.leasedRefusals).toBeGreaterThan(0);
    expect(total.pinnedReturns).toBeGreaterThan(0);
    expect(total.cappedLeases).toBeGreaterThan(0);
    expect(total.losses).toBeGreaterThan(0);
  });

  it("pinExcess: a borrower's lease on borrowed share is backed until it expires", () => {
    const a: RegionState = { region: "a", marker: freshIncarnation(0) };
    const b: RegionState = { region: "b", marker: freshIncarnation(0) };
    const ka = emptyKeyState();
    const kb = emptyKeyState();
    const now = 10_000_000;
    const g = grantLoan(a, "a", ka, LIMIT, TIMING, "b", 480_000, 3_000_000, now);
    if (!g.ok) throw new Error(g.reason);
    mergeRemote(b, "b", kb, LIMIT, TIMING, [{ lender: "a", loan: g.loan }], new Map(), now);
    check(b, kb, LIMIT, TIMING, 0, now + 600_000); // refilled to 98
    const l = acquireLease(b, kb, LIMIT, TIMING, "x", 98, 3_000_000, now + 600_000);
    expect(l.granted).toBe(98);
    // Capped at the loan's deadline − ε, not at now + D.
    expect(l.expiryUs).toBe(g.loan.deadlineUs - TIMING.epsilonUs);
    const inp = shareInputs(kb, LIMIT, TIMING, b.marker as string);
    expect(pinExcess(inp, [...kb.leases.values()], LIMIT.capacity, now + 600_000)).toBeLessThanOrEqual(0);
    // Returning the loan early would strand 48 leased tokens: refused, nothing changes.
    expect(returnLoan(b, kb, LIMIT, TIMING, "a", now + 700_000)).toMatchObject({ seq: 0, pinned: true });
    expect(kb.book.returned.size).toBe(0);
    // Once the lease is released, the return goes through.
    releaseLease(b, kb, LIMIT, TIMING, "x", 98, now + 800_000);
    expect(returnLoan(b, kb, LIMIT, TIMING, "a", now + 800_000)).toMatchObject({
      seq: g.loan.seq,
      pinned: false,
    });
  });
});
