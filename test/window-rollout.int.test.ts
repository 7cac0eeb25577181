// Issue 21 scenario 6 on real processes (2 regions: redis-server, limiter and
// gossip daemon each): a fixed_window key (C = 100 per 12 s window) split 3:1,
// every region over its slice, re-weighted to 1:1 by a real rollout proposed
// in the middle of a window. Without the window wait the growth landed about
// 3 s after the proposal, inside the same window: b admitted 25 more on top of
// a's 75 and b's 25 (125 > 100). With it (docs/design.md §3.5) growth waits
// one window + 2ε more, so it lands in a later window than any admission made
// under the old, larger slice. The oracle is exact per window: each admission
// belongs to the window of its decision instant (between send and answer; this
// host's clock is the Redis servers' TIME), and none straddles a boundary.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Cluster, regionIds, startCluster } from "@geoquota/cli";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const W_MS = 12_000;
const C = 100;
const ADMIN = { authorization: "Bearer local-cluster-admin", "content-type": "application/json" };
const body = JSON.stringify({ tenant: "win_tenant", resource: "api" });
const [A, B] = regionIds(2) as [string, string];
const doc = (weights: Record<string, number>) => ({
  default: { algorithm: "token_bucket", capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
  policies: [
    {
      tenant: "win_tenant",
      resource: "api",
      algorithm: "fixed_window",
      capacity: C,
      windowMs: W_MS,
      weights,
    },
  ],
});

interface VersionId {
  version: number;
  origin: string;
}
interface Sample {
  region: string;
  sentMs: number;
  answeredMs: number;
  status: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const windowOf = (ms: number) => Math.floor(ms / W_MS);

describe("a rollout re-weights a fixed_window key (issue 21 scenario 6, 2 regions, real Redis)", () => {
  let cluster: Cluster;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-window-rollout-"));
    const policiesFile = join(dir, "policies.json");
    writeFileSync(policiesFile, JSON.stringify(doc({ [A]: 3, [B]: 1 })));
    cluster = await startCluster({
      regions: 2,
      policiesFile,
      // Short loans: without the window wait, growth lands D + 2ε ≈ 1.7 s after the acks.
      configOverrides: { lease: { epsilonMs: 100, loanDurationMs: 1500 } },
    });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("Σ over regions of one window's admissions ≤ C before, across and after the change; b grows in a later window", async () => {
    const samples: Sample[] = [];
    let traffic = true;
    // ~25 checks/s per region (far above every slice), none sent in the last 400 ms of a window.
    const drive = async (url: string, region: string) => {
      const inflight = new Set<Promise<void>>();
      while (traffic) {
        const pos = Date.now() % W_MS;
        if (pos > W_MS - 400) {
          await sleep(W_MS - pos + 5);
          continue;
        }
        if (inflight.size < 3) {
          const p = (async () => {
            const sentMs = Date.now();
            const res = await fetch(`${url}/v1/check`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
            });
            await res.arrayBuffer();
            const answeredMs = Date.now();
            if (res.status !== 200 && res.status !== 429 && res.status !== 503)
              throw new Error(`${region}: HTTP ${res.status}`);
            samples.push({ region, sentMs, answeredMs, status: res.status });
          })().finally(() => inflight.delete(p));
          inflight.add(p);
        }
        await sleep(40);
      }
      await Promise.all(inflight);
    };
    const [a, b] = cluster.regions as [Cluster["regions"][0], Cluster["regions"][0]];
    expect([a.id, b.id]).toEqual([A, B]);
    // Start right after a window boundary so that both regions exhaust their slices before the proposal.
    await sleep(W_MS - (Date.now() % W_MS) + 100);
    const load = Promise.all([drive(a.url, a.id), drive(b.url, b.id)]);
    await sleep(4500);
    const proposedMs = Date.now();
    const res = await fetch(`${a.url}/v1/policy`, {
      method: "PUT",
      headers: { ...ADMIN, "if-match": "*" }, // the test owns the document: replace whatever is newest
      body: JSON.stringify(doc({ [A]: 1, [B]: 1 })),
    });
    expect(res.status, await res.clone().text()).toBe(202);
    const target = ((await res.json()) as { state: { target: VersionId } }).state.target;
    // Until both regions completed it (growth), then one more whole window under the new split.
    let completedMs = 0;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const states = await Promise.all(
        cluster.regions.map(async (r) => {
          const s = await fetch(`${r.url}/v1/policy`, { headers: ADMIN });
          return (await s.json()) as { completed: VersionId | null; phase: string };
        }),
      );
      if (states.every((s) => s.completed?.version === target.version && s.phase === "stable")) {
        completedMs = Date.now();
        break;
      }
      if (Date.now() > deadline) throw new Error(`rollout did not complete: ${JSON.stringify(states)}`);
      await sleep(200);
    }
    const lastWindow = windowOf(completedMs) + 1;
    await sleep((lastWindow + 1) * W_MS - Date.now() + 50);
    traffic = false;
    await load;

    const admitted = samples.filter((s) => s.status === 200);
    const straddling = admitted.filter((s) => windowOf(s.sentMs) !== windowOf(s.answeredMs));
    expect(straddling, "admissions whose window is unknown (answered across a boundary)").toEqual([]);
    const perWindow = new Map<number, { [region: string]: number }>();
    for (const s of admitted) {
      const k = windowOf(s.sentMs);
      const m = perWindow.get(k) ?? {};
      m[s.region] = (m[s.region] ?? 0) + 1;
      perWindow.set(k, m);
    }
    const first = windowOf(proposedMs);
    const table = [...perWindow.entries()]
      .map(([k, m]) => `window ${k - first}: ${JSON.stringify(m)}`)
      .join("; ");
    for (const [k, m] of perWindow) {
      const sum = (m[A] ?? 0) + (m[B] ?? 0);
      expect(
        sum,
        `window ${k - first} (0: the proposal's) admitted ${sum} > C = ${C} (${table})`,
      ).toBeLessThanOrEqual(C);
    }
    // The window of the proposal ran on the old split (a exhausted 75 before it learned the change).
    expect(perWindow.get(first)?.[A], table).toBe(75);
    // The growth happened: in the last whole window (after completion) b admits its new 50.
    expect(perWindow.get(lastWindow)?.[B], table).toBe(50);
    expect(perWindow.get(lastWindow)?.[A], table).toBe(50);
  }, 150_000);
});
