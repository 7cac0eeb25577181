// Issue 21, bug 4, on real Redis with the production RolloutStep: a proposal
// numbered (1, a) whose snapshot write was not durable (a's replica stalled)
// must not leave region a; a's primary fails over to that replica (holding the
// older snapshot), a's daemon restarts on it and numbers its next proposal
// (1, a) again, with other content. Before the fix, b and c had learned X
// under "(1, a)" and kept enforcing it (their parse caches are keyed by the
// id) while a enforced Y: Σ base shares 1.4 U once "(1, a)" completed.
// Frames are handed over by the script (every region's state to every other,
// in a fixed order), rounds are driven by hand; times are real Redis TIME.
import { parsePolicies } from "@geoquota/config";
import { createCertifier } from "@geoquota/redis";
import {
  canonicalJson,
  decodeSnapshot,
  popProposals,
  pushProposal,
  readSnapshotRaw,
  seedSnapshot,
  writeSnapshot,
} from "@geoquota/rollout";
import { type RedisServer, startPrimaryWithReplica, startRedis, startReplica } from "@geoquota/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RolloutStep, rolloutPolicyResolver } from "../src/index.js";

const IDS = ["a", "b", "c"];
const U = 1_000_000;
const STALE_MS = 50;
const WAIT_US = 200_000; // D + 2ε of this test
const MARGIN_US = 50_000; // 2ε of this test (window algorithms' extra wait; none here)
const pol = (weights?: Record<string, number>) => ({
  default: { capacity: 100, refillPerSecond: 100, ...(weights ? { weights } : {}) },
});
// X gives b 0.8 of U, Y gives a 0.6: a enforcing Y next to b enforcing X is 1.4 U.
const X = pol({ a: 1, b: 4, c: 0 });
const Y = pol({ a: 3, b: 1, c: 1 });

const servers: RedisServer[] = [];
afterEach(async () => {
  await Promise.allSettled(servers.splice(0).map((s) => s.stop()));
});

type Client = ReturnType<RedisServer["client"]>;

function stepOn(id: string, redis: Client, replicas: number): RolloutStep {
  // The daemon's snapshot certificate (main.ts): WAIT on the connection that wrote it.
  const snapshots = createCertifier(redis, { replicas, timeoutMs: 100 });
  return new RolloutStep(
    {
      region: id,
      regions: IDS,
      limiterStaleMs: STALE_MS,
      waitUs: WAIT_US,
      windowMarginUs: MARGIN_US,
      seedPolicies: () => pol(),
      parse: (raw, label) => parsePolicies(raw, label, IDS),
      now: () => performance.now(),
    },
    {
      readSnapshotRaw: () => readSnapshotRaw(redis),
      writeSnapshot: (raw) =>
        writeSnapshot(redis, raw, {
          replicas,
          certified: async (place, write) => (await snapshots.run(place, write)).durability.durable,
        }),
      popProposals: (max) => popProposals(redis, max),
      timeUs: async () => {
        const [s, us] = await redis.time();
        return Number(s) * 1_000_000 + Number(us);
      },
    },
  );
}

describe("policy ids across a failover and a daemon restart (issue 21, bug 4)", () => {
  it("an undurable proposal never leaves its region; the reused number cannot split the regions", async () => {
    const { primary: pa, replica: ra } = await startPrimaryWithReplica(servers);
    const pb = await startRedis();
    servers.push(pb);
    const pc = await startRedis();
    servers.push(pc);
    const redis: Record<string, Client> = { a: pa.client(), b: pb.client(), c: pc.client() };
    for (const id of IDS) await seedSnapshot(redis[id]!, pol(), { region: id, regions: IDS });
    const steps: Record<string, RolloutStep | undefined> = {
      a: stepOn("a", redis.a!, 1),
      b: stepOn("b", redis.b!, 0),
      c: stepOn("c", redis.c!, 0),
    };

    // Σ over the regions that enforce something of their own base share of a key.
    let worst = 0;
    const sumOfShares = () => {
      let sum = 0;
      for (const id of IDS) {
        const step = steps[id];
        if (step?.effectiveSets() === undefined) continue;
        sum += rolloutPolicyResolver(step, { region: id, regions: IDS }).resolve("t", "r").policy.baseShare;
      }
      worst = Math.max(worst, sum);
      return sum;
    };
    // Every content a region's snapshot ever held under one (version, origin)
    // (a's old primary aside: its undurable write is the one that is lost).
    const contents = new Map<string, Set<string>>();
    let restarted = false;
    const record = async () => {
      for (const id of IDS) {
        if (steps[id] === undefined || (id === "a" && !restarted)) continue;
        const raw = await readSnapshotRaw(redis[id]!);
        const d = raw === null ? undefined : decodeSnapshot(raw);
        if (d?.ok !== true) continue;
        for (const doc of d.value.docs) {
          const k = `${doc.version}/${doc.origin}`;
          const set = contents.get(k) ?? new Set<string>();
          set.add(canonicalJson(doc.policies));
          contents.set(k, set);
        }
      }
    };
    const deliver = (from: string, to: string) => {
      const bytes = steps[from]?.outgoingFrame();
      if (bytes !== undefined) steps[to]?.onFrame(from, bytes);
    };
    const exchange = (among: readonly string[]) => {
      for (const f of among) for (const t of among) if (f !== t) deliver(f, t);
    };
    const round = async (among: readonly string[]) => {
      for (const id of among) await steps[id]?.round();
      exchange(among);
      await record();
      sumOfShares();
      await new Promise((r) => setTimeout(r, 20));
    };

    for (let i = 0; i < 3; i++) await round(IDS);
    for (const id of IDS) expect(steps[id]?.status()).toMatchObject({ known: true, phase: "stable" });

    // a's replica stops replicating (a partition inside the region; a paused
    // process would still read what its socket buffered): the snapshot write
    // holding X is not durable, and the replica never gets it.
    const promoted = ra.client();
    await promoted.replicaof("NO", "ONE");
    await pushProposal(redis.a!, { proposalId: "x", policies: X, at: 1 });
    for (let i = 0; i < 2; i++) await round(IDS);
    expect(steps.a?.status().target?.version).toBe(1);
    // b and c run long enough to ack and complete whatever they learned.
    for (let i = 0; i < 15; i++) await round(["b", "c"]);

    // a's primary dies; the replica, which never got X, takes over; a's daemon
    // restarts on it and numbers its next proposal.
    await pa.kill();
    steps.a = undefined;
    servers.push(await startReplica(ra));
    redis.a = promoted;
    steps.a = stepOn("a", promoted, 1);
    restarted = true;
    await pushProposal(promoted, { proposalId: "y", policies: Y, at: 2 });

    // The rollout after the failover: every region completes one document.
    const deadline = performance.now() + 20_000;
    const settled = () =>
      IDS.every((id) => steps[id]?.status().phase === "stable") &&
      new Set(IDS.map((id) => canonicalJson(steps[id]?.status().completed))).size === 1;
    while (performance.now() < deadline && !(settled() && steps.a?.status().completed?.version === 1))
      await round(IDS);

    expect(worst, "Σ base shares over the regions exceeded U").toBeLessThanOrEqual(U);
    // One content per number: X never left a, so (1, a) names Y only.
    for (const [k, set] of contents) expect(set.size, `contents held under ${k}`).toBe(1);
    expect(settled()).toBe(true);
    for (const id of IDS) {
      const st = steps[id]!.status();
      expect(st.completed).toMatchObject({ version: 1, origin: "a" });
      const share = rolloutPolicyResolver(steps[id]!, { region: id, regions: IDS }).resolve("t", "r");
      expect(share.policy.baseShare).toBe(id === "a" ? 600_000 : 200_000);
    }
  }, 60_000);
});
