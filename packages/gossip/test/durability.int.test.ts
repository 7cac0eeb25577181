// DESIGN §4 "durable before it leaves the region", on every path, with the
// production daemon over a real Redis and a real replica: while the replica
// is paused (SIGSTOP) a grant's WAIT fails, and the grant must not reach the
// borrower in that round nor in later rounds, where the daemon reads the
// key's loan record back from Redis (the path that used to bypass the gate);
// once the replica resumes and a wait covers it, it is shipped.
import type { KeyPolicy } from "@geoquota/core";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeFrame, encodeFrame, KeyRecord, type Loan } from "@geoquota/crdt";
import { initFreshRegion } from "@geoquota/limiter";
import { createGossipStore } from "@geoquota/redis";
import { type RedisServer, startPrimaryWithReplica, startRedis } from "@geoquota/testkit";
import { afterEach, expect, it } from "vitest";
import { parseRegionConfig } from "@geoquota/config";
import { GossipDaemon, startGossip } from "../src/index.js";
import { createRedisDaemonStore } from "../src/daemon/redis-port.js";

const started: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

const regions = [
  { region: "eu-west", baseShare: 500_000, floorShare: 20_000 },
  { region: "us-east", baseShare: 500_000, floorShare: 20_000 },
];
const policyOf = (tenant: string, resource: string): KeyPolicy => ({
  tenant,
  resource,
  limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 100 },
  baseShare: 500_000,
  floorShare: 20_000,
});

class CapturingLink {
  sent: Array<{ peer: string; bytes: Uint8Array }> = [];
  send(peer: string, bytes: Uint8Array) {
    this.sent.push({ peer, bytes });
    return true;
  }
  isUp() {
    return true;
  }
  /** Loans this region put on the wire to `peer`, in every delta and full-sync frame. */
  loansTo(peer: string): Loan[] {
    const out: Loan[] = [];
    for (const s of this.sent) {
      if (s.peer !== peer) continue;
      const f = decodeFrame(s.bytes);
      if (!f.ok) throw new Error(f.error.message);
      if (f.value.kind !== "delta") continue;
      for (const e of f.value.entries) out.push(...e.record.loans.values());
    }
    return out;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("a grant whose WAIT failed ships neither in its round nor from the record read back later; it ships once a wait covers it", async () => {
  const { primary, replica } = await startPrimaryWithReplica(started);
  const redis = primary.client();
  await initFreshRegion(redis);
  const lease = { epsilonMs: 250, loanDurationMs: 3000 };
  const port = await createRedisDaemonStore(
    redis,
    { region: "us-east", lease },
    { replicas: 1, waitTimeoutMs: 100 },
  );
  const link = new CapturingLink();
  const daemon = new GossipDaemon(
    { region: "us-east", peers: ["eu-west"], round: { minMs: 200, maxMs: 500 } },
    {
      store: port,
      link,
      policies: { resolve: (t, r) => ({ policy: policyOf(t, r), regions }) },
      random: () => 0.5,
    },
  );
  const p = policyOf("dur_t", "api");
  // Reads the lender's loan register straight from Redis (what any later round reads back).
  const inspect = createGossipStore({
    redis: primary.client(),
    region: "us-east",
    timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
  });
  const grantedInRedis = async () =>
    (await inspect.readKeyState(p)).granted.filter((g) => g.borrower === "eu-west");

  // eu-west is hot: its counters grow fast between rounds.
  let version = 0;
  const hotRound = async () => {
    version += 1;
    const r = KeyRecord.initial();
    r.consumed.p.set("eu-west.a", 60 * version);
    r.denied.set("eu-west.a", 240 * version);
    daemon.onFrame(
      "eu-west",
      encodeFrame({ kind: "delta", from: "eu-west", version, entries: [{ key: "dur_t|api", record: r }] }),
    );
    await sleep(250);
    await daemon.round();
  };

  try {
    replica.pause();
    let held: number | undefined;
    for (let i = 0; i < 20 && held === undefined; i++) {
      await hotRound();
      held = (await grantedInRedis())[0]?.seq;
    }
    expect(held).toBeDefined();
    // Its round did not ship it, nor do the next ones, which read it back.
    for (let i = 0; i < 4; i++) await hotRound();
    expect(link.loansTo("eu-west")).toEqual([]);
    expect(daemon.recordOf("dur_t", "api")?.loans.size ?? 0).toBe(0);
    expect((await grantedInRedis()).length).toBe(1);
  } finally {
    replica.resume();
  }
  // The replica is back: the next round's wait covers the record, it ships.
  await hotRound();
  const shipped = link.loansTo("eu-west");
  expect(shipped.length).toBeGreaterThan(0);
  expect(shipped.every((l) => l.lender === "us-east" && l.borrower === "eu-west")).toBe(true);
  await daemon.stop();
  await port.close();
}, 60_000);

/** A policies file of its own (the daemon reads it before it checks Redis). */
function policiesFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "gq-durability-"));
  const file = join(dir, "policies.json");
  writeFileSync(file, JSON.stringify({ default: { capacity: 10, refillPerSecond: 1 }, policies: [] }));
  return file;
}

it("the daemon refuses to start on an evicting Redis, naming maxmemory-policy", async () => {
  const server = await startRedis({ args: ["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"] });
  started.push(server);
  const config = parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: server.url },
      regions: [
        { id: "us-east", gossip: "127.0.0.1:1" },
        { id: "eu-west", gossip: "127.0.0.1:2" },
      ],
      gossip: { listen: { host: "127.0.0.1", port: 0 }, plaintext: true },
      policiesFile: policiesFile(),
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
    },
    { file: "test.json", env: {} },
  );
  await expect(startGossip(config)).rejects.toThrow(/GQ_ERR_REDIS_SETUP.*maxmemory-policy volatile-lru/);
});
