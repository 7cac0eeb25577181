// Two daemons from region config files over real Redis: a fresh cluster
// (no snapshots) adopts the seed, a SIGHUP reload of a changed policies file
// becomes version 1 and rolls out to both regions (grown after every ack +
// D + 2ε), a reload of an invalid file is refused whole with the field named,
// and a wiped snapshot is rewritten by the running daemon.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadRegionConfig, type RegionConfig } from "@geoquota/config";
import { readSnapshot } from "@geoquota/rollout";
import { type RedisServer, startRedis, waitFor } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningGossip, startGossip } from "../src/daemon/main.js";

const ids = ["eu-west", "us-east"] as const;
let dir = "";
const servers: RedisServer[] = [];
const running: RunningGossip[] = [];
const policies = (capacity: number) => ({ default: { capacity, refillPerSecond: 1 } });

// Port 0 everywhere (no port picked before it is bound); the daemons are
// handed each other's addresses once they listen, as the orchestrator does.
async function writeConfig(id: string, redisUrl: string): Promise<RegionConfig> {
  const file = join(dir, `${id}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      region: id,
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: redisUrl },
      regions: ids.map((r) => ({ id: r, gossip: "127.0.0.1:0" })),
      gossip: {
        listen: { host: "127.0.0.1", port: 0 },
        round: { minMs: 50, maxMs: 100 },
        reconnect: { baseMs: 50, capMs: 200 },
        plaintext: true,
      },
      lease: { epsilonMs: 50, loanDurationMs: 400 },
      policy: { limiterStaleMs: 200 },
      sharedSecret: "rollout-test-shared-secret",
      adminToken: "rollout-test-admin-token-0",
      policiesFile: "policies.json",
    }),
  );
  return loadRegionConfig(file, {});
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gq-rollout-"));
  writeFileSync(join(dir, "policies.json"), JSON.stringify(policies(5)));
  for (const _ of ids) servers.push(await startRedis());
});

afterAll(async () => {
  await Promise.allSettled(running.splice(0).map((r) => r.close()));
  await Promise.allSettled(servers.splice(0).map((s) => s.stop()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("replicated policies between two daemons", () => {
  it("seed, SIGHUP reload rolled out everywhere, a bad file refused, a wiped snapshot rewritten", async () => {
    const configs = await Promise.all(ids.map((id, i) => writeConfig(id, servers[i]!.url)));
    expect(configs[0]!.policy).toEqual({ limiterStaleMs: 200, replicated: true });
    for (const c of configs) running.push(await startGossip(c));
    for (const d of running)
      for (const o of running) if (o !== d) d.setPeerAddress(o.mesh.self, `127.0.0.1:${o.mesh.port()}`);
    const redis = servers.map((s) => s.client());
    const snap = async (i: number) => {
      const s = await readSnapshot(redis[i]!);
      return s?.ok ? s.value : undefined;
    };
    await waitFor(
      "both seeded",
      async () => (await snap(0))?.phase === "stable" && (await snap(1)) !== undefined,
      10_000,
    );
    expect((await snap(1))?.docs[0]?.policies).toEqual(policies(5));

    writeFileSync(join(dir, "policies.json"), JSON.stringify(policies(9)));
    const ok = await running[1]!.reloadPolicies();
    expect(ok).toMatchObject({ ok: true });
    await waitFor(
      "version 1 completed in both regions",
      async () => (await snap(0))?.completed.version === 1 && (await snap(1))?.completed.version === 1,
      15_000,
    );
    expect((await snap(0))?.docs.map((d) => d.policies)).toEqual([policies(9)]);
    expect(running[0]!.rollout?.status()).toMatchObject({
      phase: "stable",
      target: { version: 1, origin: "us-east" },
    });

    writeFileSync(
      join(dir, "policies.json"),
      JSON.stringify({ default: { capacity: -3, refillPerSecond: 1 } }),
    );
    const bad = await running[0]!.reloadPolicies();
    expect(bad.ok).toBe(false);
    expect(bad.message).toMatch(/default\.capacity/);

    await redis[0]!.del("gq:policy");
    await waitFor("rewritten", async () => (await snap(0))?.completed.version === 1, 5_000);
    expect(running[0]!.rollout?.status().target?.version).toBe(1);
  }, 60_000);
});
