// The replicated policy source (docs/design.md §3.4): a limiter enforces the
// meet of the versions in the daemon's snapshot, uses a snapshot only until
// its read was sent + limiterStaleMs, and fails closed before and after.
import { type PolicySet, parsePolicies } from "@geoquota/config";
import { idOf, makeDoc } from "@geoquota/rollout";
import { describe, expect, it } from "vitest";
import { LimiterError } from "../src/errors.js";
import {
  documentOf,
  type PolicyTarget,
  ReplicatedPolicies,
  type RolloutView,
  StaticPolicies,
} from "../src/policy-source.js";

const REGIONS = ["us-east", "eu-west"];
const doc = (capacity: number, weights?: Record<string, number>) => ({
  default: { capacity, refillPerSecond: capacity, ...(weights ? { weights } : {}) },
  policies: [],
});

function view(
  docs: { version: number; capacity: number; proposalId?: string }[],
  completed = 0,
): RolloutView {
  const full = docs.map((d) =>
    makeDoc({
      version: d.version,
      origin: d.version === 0 ? "seed" : "us-east",
      ...(d.proposalId ? { proposalId: d.proposalId } : {}),
      proposedAtMs: 0,
      policies: doc(d.capacity),
    }),
  );
  const ids = full.map(idOf);
  const target = ids[ids.length - 1]!;
  return {
    target,
    completed: ids[completed]!,
    phase: ids.length > 1 ? "rolling_out" : "stable",
    growAtUs: null,
    docs: full as RolloutView["docs"],
    regions: Object.fromEntries(REGIONS.map((r) => [r, { acked: target, epoch: 0 }])),
  };
}

function harness(initial: RolloutView | null) {
  let now = 1000;
  let snapshot: RolloutView | null = initial;
  let failing = false;
  let readLatencyMs = 0;
  const pushed: { proposalId: string; policies?: unknown }[] = [];
  const seen: { sets: readonly PolicySet[]; validUntil: number | undefined } = {
    sets: [],
    validUntil: undefined,
  };
  const target: PolicyTarget = {
    setPolicies: (sets) => {
      seen.sets = sets;
    },
    setPolicyValidUntil: (ms) => {
      seen.validUntil = ms;
    },
  };
  const source = new ReplicatedPolicies({
    region: "us-east",
    regionIds: REGIONS,
    staleMs: 1000,
    read: async () => {
      now += readLatencyMs; // the answer arrives later than the read was sent
      if (failing) throw new Error("redis down");
      return snapshot;
    },
    push: async (p) => {
      pushed.push(p);
      // The daemon numbers it on its next round.
      const v = snapshot as RolloutView;
      snapshot = view([
        { version: 0, capacity: 10 },
        {
          version: v.target.version + 1,
          capacity: ("policies" in p ? (p.policies as ReturnType<typeof doc>) : doc(0)).default.capacity,
          proposalId: p.proposalId,
        },
      ]);
    },
    target,
    now: () => now,
    proposeWaitMs: 2000,
  });
  return {
    source,
    seen,
    pushed,
    advance: (ms: number) => {
      now += ms;
    },
    set: (v: RolloutView | null) => {
      snapshot = v;
    },
    fail: (f: boolean) => {
      failing = f;
    },
    latency: (ms: number) => {
      readLatencyMs = ms;
    },
  };
}

describe("replicated policy source", () => {
  it("fails closed until the first snapshot, then enforces every version in it (the meet)", async () => {
    const h = harness(null);
    expect(h.seen.validUntil).toBe(Number.NEGATIVE_INFINITY);
    await h.source.poll();
    expect(h.seen.validUntil).toBe(Number.NEGATIVE_INFINITY);
    expect(h.source.state().phase).toBe("unknown");
    h.set(
      view([
        { version: 0, capacity: 10 },
        { version: 1, capacity: 4 },
      ]),
    );
    await h.source.poll();
    expect(h.seen.sets.map((s) => s.default.capacity)).toEqual([10, 4]);
    expect(h.seen.validUntil).toBe(1000 + 1000);
    expect(h.source.state()).toMatchObject({
      phase: "rolling_out",
      target: { version: 1 },
      completed: { version: 0 },
    });
  });

  it("a snapshot stays usable until its read was sent + limiterStaleMs, then the state is unknown", async () => {
    const h = harness(view([{ version: 0, capacity: 10 }]));
    h.latency(40);
    await h.source.poll();
    expect(h.seen.validUntil).toBe(2000); // sent at 1000, answered at 1040
    h.latency(0);
    h.fail(true);
    h.advance(900);
    await h.source.poll();
    expect(h.seen.validUntil).toBe(2000); // a failed read extends nothing
    expect(h.source.state().phase).toBe("stable");
    h.advance(61);
    expect(h.source.state().phase).toBe("unknown");
    h.fail(false);
    await h.source.poll();
    expect(h.seen.validUntil).toBe(2001 + 1000);
  });

  it("a snapshot that vanished (Redis lost it) extends nothing: the daemon must write it again", async () => {
    const h = harness(view([{ version: 0, capacity: 10 }]));
    await h.source.poll();
    h.set(null);
    h.advance(500);
    await h.source.poll();
    expect(h.seen.validUntil).toBe(2000);
  });

  it("propose: validated whole (400 naming the field), pushed to the daemon, answered once numbered", async () => {
    const h = harness(view([{ version: 0, capacity: 10 }]));
    await h.source.poll();
    const bad = h.source.propose({ default: { capacity: -1, refillPerSecond: 1 }, policies: [] });
    await expect(bad).rejects.toBeInstanceOf(LimiterError);
    await expect(bad).rejects.toMatchObject({ code: "GQ_ERR_INVALID_POLICY", field: "default.capacity" });
    expect(h.pushed).toEqual([]);
    const same = await h.source.propose(doc(10));
    expect(same.unchanged).toBe(true);
    expect(h.pushed).toEqual([]);
    const r = await h.source.propose(doc(20));
    expect(h.pushed).toHaveLength(1);
    expect(r).toMatchObject({ unchanged: false, proposalId: h.pushed[0]!.proposalId });
    expect(r.state.target).toMatchObject({ version: 1, origin: "us-east" });
    expect(h.seen.sets.map((s) => s.default.capacity)).toEqual([10, 20]);
  });

  it("If-Match: a document based on another version is refused 412 naming If-Match; the newest passes", async () => {
    const h = harness(view([{ version: 0, capacity: 10 }]));
    await h.source.poll();
    const t = h.source.state().target!;
    const stale = `"v${t.version}@${t.origin}#${"0".repeat(32)}"`;
    await expect(h.source.propose(doc(20), { ifMatch: stale })).rejects.toMatchObject({
      code: "GQ_ERR_POLICY_STALE",
      statusCode: 412,
      field: "If-Match",
    });
    await expect(h.source.propose(doc(20), { ifMatch: `"v9@us-east#${t.digest}"` })).rejects.toMatchObject({
      code: "GQ_ERR_POLICY_STALE",
    });
    expect(h.pushed).toEqual([]);
    const r = await h.source.propose(doc(20), {
      ifMatch: `"v${t.version}@${t.origin}#${t.digest.slice(0, 8)}"`,
    });
    expect(r.unchanged).toBe(false);
    expect(h.pushed).toHaveLength(1);
  });
});

describe("documentOf", () => {
  it("rebuilds a document that parses back to the same set (entries, overrides, allow and deny lists)", () => {
    const set = parsePolicies(
      {
        default: { capacity: 5, refillPerSecond: 1, shadow: true },
        policies: [
          {
            tenant: "*",
            resource: "api",
            algorithm: "gcra",
            capacity: 9,
            refill: { tokens: 9, perSeconds: 3 },
          },
          { tenant: "t", resource: "win", algorithm: "fixed_window", capacity: 4, windowMs: 1000 },
        ],
        overrides: [{ tenant: "t", resource: "api", capacity: 2 }],
        allow: [{ tenant: "vip" }, { key: "*/health*" }, { key: "a/b" }],
        deny: [{ key: "bad_*/x" }],
      },
      "p.json",
      REGIONS,
    );
    expect(parsePolicies(documentOf(set), "again.json", REGIONS)).toEqual(set);
  });
});

describe("static policy source", () => {
  const sink = (into: { sets: readonly PolicySet[] }): PolicyTarget => ({
    setPolicies: (x) => {
      into.sets = x;
    },
    setPolicyValidUntil: () => {},
  });
  it("one region: applies a change in this process and counts versions", async () => {
    const seen = { sets: [] as readonly PolicySet[] };
    const s = new StaticPolicies("us-east", ["us-east"], doc(10), sink(seen));
    const r = await s.propose(doc(30));
    expect(r.state.target).toMatchObject({ version: 1, origin: "us-east" });
    expect(seen.sets[0]?.default.capacity).toBe(30);
  });
  // Issue 21, bug 5: with replicated: false and several regions, an admin PUT of
  // a new algorithm applied in one limiter process while its daemon kept lending
  // from the file's token bucket (152 admitted against a bound of 109.8).
  it("several regions: refuses every change that sizes a slice, naming the field; lists stay changeable", async () => {
    const seen = { sets: [] as readonly PolicySet[] };
    const file = {
      ...doc(10),
      policies: [{ tenant: "cust_a", resource: "api", capacity: 5, refillPerSecond: 5 }],
    };
    const s = new StaticPolicies("us-east", REGIONS, file, sink(seen));
    const refused = async (next: unknown, field: string) => {
      const err = await s.propose(next).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, field).toBeInstanceOf(LimiterError);
      expect(err).toMatchObject({ code: "GQ_ERR_INVALID_POLICY", field });
      expect((err as Error).message).toContain("policy.replicated");
    };
    const entry = (extra: object) => ({ ...file, policies: [{ ...file.policies[0], ...extra }] });
    await refused(
      { ...file, default: { algorithm: "gcra", capacity: 10, refillPerSecond: 10 } },
      "default.algorithm",
    );
    await refused({ ...file, default: { capacity: 30, refillPerSecond: 10 } }, "default.capacity");
    await refused({ ...file, default: { capacity: 10, refillPerSecond: 20 } }, "default.refillPerSecond");
    await refused(
      { ...file, default: { capacity: 10, refillPerSecond: 10, weights: { "us-east": 3, "eu-west": 1 } } },
      "default.weights",
    );
    await refused(entry({ capacity: 6 }), "policies.cust_a/api.capacity");
    await refused(entry({ floorPpm: 100_000 }), "policies.cust_a/api.floorPpm");
    await refused({ ...file, policies: [] }, "policies.cust_a/api.capacity");
    await refused(
      {
        ...file,
        policies: [...file.policies, { tenant: "*", resource: "api", capacity: 1, refillPerSecond: 1 }],
      },
      "policies.*/api.capacity",
    );
    await refused(
      { ...file, overrides: [{ tenant: "cust_a", resource: "api", algorithm: "gcra" }] },
      "overrides.cust_a/api.algorithm",
    );
    expect(s.state().target?.version).toBe(0);
    // Weights that give the same base shares, a new entry equal to what the key
    // resolved to, a deny list, shadow mode: no slice moves.
    const same = {
      ...file,
      default: { capacity: 10, refillPerSecond: 10, weights: { "us-east": 2, "eu-west": 2 } },
      policies: [...file.policies, { tenant: "cust_b", resource: "api", capacity: 10, refillPerSecond: 10 }],
      deny: [{ tenant: "blocked" }],
    };
    await expect(s.propose(same)).resolves.toMatchObject({ unchanged: false });
    await expect(s.propose({ ...same, default: { ...same.default, shadow: true } })).resolves.toMatchObject({
      unchanged: false,
    });
    expect(s.state().target?.version).toBe(2);
    expect(seen.sets[0]?.deny?.tenants.has("blocked")).toBe(true);
  });
});
