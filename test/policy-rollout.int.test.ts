// Issue 15's acceptance on real processes: a 3-region cluster under load
// (redis-server, limiter and gossip daemon per region, gossip links behind
// Toxiproxy). Through the admin API of one region: raise C and r, lower them,
// change the weights, switch token bucket → GCRA with one region partitioned
// during the switch. The exact oracle holds over every interval with the
// bound of docs/design.md §3.4 (old before a change, max(C)+max(r)·T across
// it, new after every region completed it); the partitioned region delays
// the growth; every region reports the same version once healed; and no key
// is left denying.
import { fileURLToPath } from "node:url";
import { type Cluster, startCluster } from "@geoquota/cli";
import { type Admission, checkGlobalBound, type LimitSegment } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const policiesFile = fileURLToPath(new URL("./fixtures/policies-rollout.json", import.meta.url));
const ADMIN = { authorization: "Bearer local-cluster-admin", "content-type": "application/json" };
const body = JSON.stringify({ tenant: "rollout_tenant", resource: "api" });

interface VersionId {
  version: number;
  origin: string;
}
interface PolicyState {
  region: string;
  phase: string;
  target: VersionId | null;
  completed: VersionId | null;
  regions: { id: string; acked: VersionId | null }[];
}
interface Sample extends Admission {
  region: string;
  status: number;
}

const sameId = (a: VersionId | null, b: VersionId | null) =>
  a !== null && b !== null && a.version === b.version && a.origin === b.origin;

function doc(spec: Record<string, unknown>) {
  return {
    default: { algorithm: "token_bucket", capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
    policies: [{ tenant: "rollout_tenant", resource: "api", ...spec }],
  };
}

async function state(url: string): Promise<PolicyState> {
  const res = await fetch(`${url}/v1/policy`, { headers: ADMIN });
  expect(res.status).toBe(200);
  return (await res.json()) as PolicyState;
}

describe("policy rollout on a real 3-region cluster under load", () => {
  let cluster: Cluster;
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  beforeAll(async () => {
    cluster = await startCluster({
      regions: 3,
      policiesFile,
      toxiproxy: true,
      // Short loans: growth waits D + 2ε after every region acknowledged.
      configOverrides: { lease: { epsilonMs: 100, loanDurationMs: 1500 } },
    });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("raises, lowers, re-weights and switches to GCRA with the oracle holding and no key left denying", async () => {
    const samples: Sample[] = [];
    let traffic = true;
    // Open loop: ~25 checks/s per region, a few in flight (every region above its share most of the time).
    const drive = async (url: string, region: string) => {
      const inflight = new Set<Promise<void>>();
      while (traffic) {
        while (inflight.size < 4) {
          const p = (async () => {
            const sentMs = now();
            const res = await fetch(`${url}/v1/check`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
            });
            await res.arrayBuffer();
            const answeredMs = now();
            if (res.status !== 200 && res.status !== 429 && res.status !== 503)
              throw new Error(`${region}: HTTP ${res.status}`);
            samples.push({
              region,
              sentMs,
              answeredMs,
              status: res.status,
              cost: res.status === 200 ? 1 : 0,
            });
          })().finally(() => inflight.delete(p));
          inflight.add(p);
        }
        await new Promise((r) => setTimeout(r, 40));
      }
      await Promise.all(inflight);
    };
    const load = Promise.all(cluster.regions.map((r) => drive(r.url, r.id)));

    const [a, b, c] = cluster.regions as [
      Cluster["regions"][0],
      Cluster["regions"][0],
      Cluster["regions"][0],
    ];
    /** Every region completed `target` (and acknowledges it everywhere); the answer time of the last poll. */
    const settle = async (target: VersionId, timeoutMs = 30_000): Promise<number> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(cluster.regions.map((r) => state(r.url)));
        if (states.every((s) => sameId(s.completed, target) && s.phase === "stable")) return now();
        if (Date.now() > deadline)
          throw new Error(`rollout of v${target.version} did not settle: ${JSON.stringify(states)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const segments: LimitSegment[] = [];
    let current = { capacity: 30, refillPerSecond: 15, fromMs: Number.NEGATIVE_INFINITY };
    /** Proposes through `via`; the old limit holds until the change settled, the new one from its proposal. */
    const propose = async (
      via: string,
      spec: Record<string, unknown>,
      limit: { capacity: number; refillPerSecond: number },
    ) => {
      const sentMs = now();
      const res = await fetch(`${via}/v1/policy`, {
        method: "PUT",
        headers: { ...ADMIN, "if-match": "*" }, // the test owns the document: replace whatever is newest
        body: JSON.stringify(doc(spec)),
      });
      expect(res.status, await res.clone().text()).toBe(202);
      const r = (await res.json()) as { state: PolicyState };
      expect(r.state.target).not.toBeNull();
      return {
        target: r.state.target as VersionId,
        done: (settledMs: number) => {
          segments.push({ ...current, toMs: settledMs });
          current = { ...limit, fromMs: sentMs };
        },
      };
    };

    await new Promise((r) => setTimeout(r, 2000)); // the old policy under load first

    // 1. raise C and r
    let p = await propose(
      a.url,
      { capacity: 60, refillPerSecond: 30 },
      { capacity: 60, refillPerSecond: 30 },
    );
    p.done(await settle(p.target));
    await new Promise((r) => setTimeout(r, 1000));
    // 2. lower them
    p = await propose(b.url, { capacity: 20, refillPerSecond: 10 }, { capacity: 20, refillPerSecond: 10 });
    p.done(await settle(p.target));
    await new Promise((r) => setTimeout(r, 1000));
    // 3. change the weights (C and r unchanged: the global bound stays, the slices move)
    p = await propose(
      c.url,
      { capacity: 20, refillPerSecond: 10, weights: { [a.id]: 4, [b.id]: 1, [c.id]: 1 } },
      { capacity: 20, refillPerSecond: 10 },
    );
    p.done(await settle(p.target));
    await new Promise((r) => setTimeout(r, 1000));
    // 4. token bucket → GCRA (and a larger C) while region c is partitioned
    await cluster.setGossipLinks(c.id, false);
    p = await propose(
      a.url,
      { algorithm: "gcra", capacity: 24, refillPerSecond: 12 },
      { capacity: 24, refillPerSecond: 12 },
    );
    await new Promise((r) => setTimeout(r, 4000));
    const during = await Promise.all(cluster.regions.map((r) => state(r.url)));
    // The partitioned region delays growth: nobody completes a version c has not acknowledged.
    for (const s of during) expect(sameId(s.completed, p.target), JSON.stringify(s)).toBe(false);
    expect(during[2]!.target?.version, "c never heard of it").toBeLessThan(p.target.version);
    expect(during[0]!.phase).toBe("rolling_out");
    await cluster.setGossipLinks(c.id, true);
    p.done(await settle(p.target));
    await new Promise((r) => setTimeout(r, 1500));
    traffic = false;
    await load;
    segments.push({ ...current, toMs: Number.POSITIVE_INFINITY });

    // Every region reports the same version.
    const final = await Promise.all(cluster.regions.map((r) => state(r.url)));
    for (const s of final) {
      expect(s.target).toEqual(p.target);
      expect(s.completed).toEqual(p.target);
    }
    // The oracle over every interval, with the bound across each change.
    const admitted = samples.filter((s) => s.status === 200);
    const verdict = checkGlobalBound(admitted, { segments });
    expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
    for (const r of cluster.regions) {
      expect(admitted.filter((s) => s.region === r.id).length, `${r.id} admitted`).toBeGreaterThan(0);
    }
    // No key left denying: after a full refill (C/r = 2 s) every region admits again.
    await new Promise((r) => setTimeout(r, 2500));
    for (const r of cluster.regions) {
      const res = await fetch(`${r.url}/v1/check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      expect(res.status, `${r.id}: ${await res.text()}`).toBe(200);
    }
  }, 180_000);
});
