// A check resolves its key once (issue 27 point 5): the limiter keeps one
// KeyPolicy object per key and policy version, so the Redis store's argument
// cache (keyed by that object, @geoquota/redis args.ts) builds a key's KEYS
// and ARGV once and every later check of the key reuses them; the check then
// carries the resolved key down (receipt names, metric labels), so a later
// check of the key reads no policy again.
import type { Decision, KeyPolicy } from "@geoquota/core";
import { type KeyArgs, keyArgsBuilder } from "@geoquota/redis";
import { idOf, makeDoc } from "@geoquota/rollout";
import { describe, expect, it, vi } from "vitest";
import { Limiter } from "../src/limiter.js";
import { ReplicatedPolicies, type RolloutView } from "../src/policy-source.js";
import { testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

const TIMING = { epsilonUs: 250_000, loanDurationUs: 10_000_000 };

/** A FakeStore that builds each check's script arguments as the Redis store does, counting builds. */
class ArgsCountingStore extends FakeStore {
  private readonly build = keyArgsBuilder(TIMING);
  readonly built = new Set<KeyArgs>();
  readonly policies: KeyPolicy[] = [];
  override async check(policy: KeyPolicy, cost: number): Promise<Decision> {
    this.policies.push(policy);
    this.built.add(this.build(policy));
    return await super.check(policy, cost);
  }
}

describe("a key resolved once per check", () => {
  it("three checks of one key reuse the cached script arguments", async () => {
    const store = new ArgsCountingStore();
    const limiter = new Limiter({ store, config: testConfig(), policies: testPolicies() });
    for (let i = 0; i < 3; i++) {
      const r = await limiter.check("cust_ent_9942", "payments_checkout", 1);
      expect(r.source).toBe("store");
    }
    expect(store.policies).toHaveLength(3);
    expect(store.policies[1]).toBe(store.policies[0]);
    expect(store.policies[2]).toBe(store.policies[0]);
    expect(store.built.size).toBe(1);
  });

  it("another key, or a new policy version, builds its arguments anew", async () => {
    const store = new ArgsCountingStore();
    const limiter = new Limiter({ store, config: testConfig(), policies: testPolicies() });
    await limiter.check("cust_ent_9942", "payments_checkout", 1);
    await limiter.check("cust_free_1018", "payments_checkout", 1);
    expect(store.built.size).toBe(2);
    limiter.setPolicies(testPolicies());
    await limiter.check("cust_ent_9942", "payments_checkout", 1);
    await limiter.check("cust_ent_9942", "payments_checkout", 1);
    expect(store.built.size).toBe(3);
  });

  it("a later check of the key, metrics on, reads no policy map: its labels came with the key", async () => {
    const policies = testPolicies();
    const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies, metrics: true });
    const compound = [
      { tenant: "cust_ent_9942", resource: "payments_checkout", cost: 1 },
      { tenant: "walk_in_7", resource: "payments_checkout", cost: 1 },
    ];
    await limiter.check("cust_ent_9942", "payments_checkout", 1);
    await limiter.checkCompound(compound);
    const has = vi.spyOn(policies.entries, "has");
    const get = vi.spyOn(policies.entries, "get");
    for (let i = 0; i < 3; i++) {
      expect((await limiter.check("cust_ent_9942", "payments_checkout", 1)).source).toBe("store");
      expect((await limiter.checkCompound(compound)).parts).toHaveLength(2);
    }
    expect(has).not.toHaveBeenCalled();
    expect(get).not.toHaveBeenCalled();
    // The labels are the ones a per-check lookup gave.
    const text = await limiter.registry!.metrics();
    expect(text).toMatch(
      /^geoquota_key_decisions_total\{key_class="cust_ent_9942",resource="payments_checkout",result="\w+"\} \d/m,
    );
    expect(text).toMatch(
      /^geoquota_key_decisions_total\{key_class="default",resource="payments_checkout",result="\w+"\} \d/m,
    );
    expect(text).toContain('geoquota_share_ratio{key_class="cust_ent_9942",resource="payments_checkout"}');
  });
});

describe("a key stays resolved while the replicated policy does not change", () => {
  // The replicated source reads the daemon's snapshot every staleMs / 4 and hands the
  // limiter the versions in it on every read. Sets that did not change must not empty the
  // resolved keys: else every hot key is re-resolved four times a second and the store's
  // argument cache and the lease pool (both keyed by the KeyPolicy object) miss.
  const view = (capacity: number): RolloutView => {
    const d = makeDoc({
      version: capacity === 1000 ? 0 : 1,
      origin: capacity === 1000 ? "seed" : "us-east",
      proposedAtMs: 0,
      policies: { default: { capacity, refillPerSecond: capacity }, policies: [] },
    });
    return {
      target: idOf(d),
      completed: idOf(d),
      phase: "stable",
      growAtUs: null,
      docs: [d] as RolloutView["docs"],
      regions: Object.fromEntries(testConfig().regions.map((r) => [r.id, { acked: idOf(d), epoch: 0 }])),
    };
  };

  it("polls of an unchanged snapshot keep the KeyPolicy object; a new version replaces it", async () => {
    const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
    let snapshot = view(1000);
    const source = new ReplicatedPolicies({
      region: limiter.region,
      regionIds: limiter.regions,
      staleMs: 1000,
      read: async () => snapshot,
      push: async () => {},
      target: limiter,
      now: () => 0,
    });
    await source.poll();
    const first = limiter.resolve("walk_in_7", "payments_checkout");
    expect(first.limit.capacity).toBe(1000);
    for (let i = 0; i < 3; i++) {
      snapshot = { ...snapshot }; // a fresh read of the same documents
      await source.poll();
      expect(limiter.resolve("walk_in_7", "payments_checkout")).toBe(first);
    }
    snapshot = view(400);
    await source.poll();
    const next = limiter.resolve("walk_in_7", "payments_checkout");
    expect(next).not.toBe(first);
    expect(next.limit.capacity).toBe(400);
  });
});
