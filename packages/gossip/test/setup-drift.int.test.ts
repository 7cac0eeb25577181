// DESIGN §4 "Checked continuously" in the daemon, on real Redis: the start
// checks run again on every primary-watcher tick. An extra replica attached
// after start holds grants, early returns and read-back loans (the WAIT does
// not cover it) until it is gone; eviction switched on rotates the markers
// (recovery) and is logged once and counted with the setting named.
import type { KeyPolicy } from "@geoquota/core";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseRegionConfig } from "@geoquota/config";
import { initFreshRegion, markerKey, type SetupDriftChange } from "@geoquota/redis";
import {
  type RedisServer,
  startPrimaryWithReplica,
  startRedis,
  startReplica,
  waitFor,
} from "@geoquota/testkit";
import pino from "pino";
import { afterEach, expect, it } from "vitest";
import { startGossip } from "../src/index.js";
import { createRedisDaemonStore } from "../src/daemon/redis-port.js";

const started: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

const lender: KeyPolicy = {
  tenant: "drift_t",
  resource: "api",
  limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 100 },
  baseShare: 500_000,
  floorShare: 20_000,
};

it("an extra replica attached after start holds grants and read-back loans until it is gone", async () => {
  const { primary } = await startPrimaryWithReplica(started);
  const redis = primary.client();
  await initFreshRegion(redis);
  const changes: SetupDriftChange[] = [];
  const port = await createRedisDaemonStore(
    redis,
    { region: "us-east", lease: { epsilonMs: 250, loanDurationMs: 3000 } },
    { replicas: 1, primaryCheckMs: 50, onDrift: (c) => changes.push(c) },
  );
  try {
    expect(await port.grantLoan(lender, "eu-west", 50_000)).not.toBeNull();
    const extra = await startReplica(primary);
    started.push(extra);
    await waitFor("the watcher saw the extra replica", async () => port.drifting().includes("replicas"));
    // Refused while drifting, every time: the first WAIT may miss the new replica's ack
    // anyway (the certificate), the later ones ask for both and would succeed.
    for (let i = 0; i < 3; i++) expect(await port.grantLoan(lender, "eu-west", 60_000 + i)).toBeNull();
    expect(await port.waitDurable(lender)).toBe(false);
    expect(changes).toMatchObject([{ setting: "replicas", drifting: true, rotatedShards: 0 }]);
    expect(changes[0]?.detail).toMatch(/2 connected replicas but redis\.replicas is 1/);
    await extra.stop();
    await waitFor("the watcher saw it leave", async () => port.drifting().length === 0, 15_000);
    expect(await port.waitDurable(lender)).toBe(true);
    expect(await port.grantLoan(lender, "eu-west", 60_000)).not.toBeNull();
    // One line per change, not one per tick.
    expect(changes.map((c) => c.drifting)).toEqual([true, false]);
  } finally {
    await port.close();
  }
}, 60_000);

it("the daemon: eviction switched on rotates the markers, is logged once and counted by setting", async () => {
  const server = await startRedis();
  started.push(server);
  const redis = server.client();
  await initFreshRegion(redis);
  const dir = mkdtempSync(join(tmpdir(), "gq-drift-"));
  const policiesFile = join(dir, "policies.json");
  writeFileSync(
    policiesFile,
    JSON.stringify({ default: { capacity: 10, refillPerSecond: 1 }, policies: [] }),
  );
  const config = parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: server.url, primaryCheckMs: 50 },
      regions: [
        { id: "us-east", gossip: "127.0.0.1:1" },
        { id: "eu-west", gossip: "127.0.0.1:2" },
      ],
      gossip: { listen: { host: "127.0.0.1", port: 0 }, plaintext: true },
      policiesFile,
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
    },
    { file: "test.json", env: {} },
  );
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  const running = await startGossip(config, { logger });
  const metric = async (series: string) => {
    const text = await (await fetch(`http://127.0.0.1:${running.httpPort}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };
  const gauge = 'geoquota_redis_setup_drift{setting="maxmemory-policy"}';
  const counter = 'geoquota_redis_setup_drift_changes_total{setting="maxmemory-policy"}';
  try {
    expect(await metric(gauge)).toBe(0);
    expect(await metric('geoquota_redis_setup_drift{setting="replicas"}')).toBe(0);
    const before = await redis.get(markerKey(0));
    // A maxmemory far above what the test uses: nothing is evicted yet, but it could be.
    await redis.config("SET", "maxmemory-policy", "allkeys-lru");
    await redis.config("SET", "maxmemory", "1gb");
    await waitFor("the daemon reports the drift", async () => (await metric(gauge)) === 1);
    expect(await metric(counter)).toBe(1);
    expect(await redis.get(markerKey(0))).not.toBe(before);
    // Several ticks later: still one line.
    await new Promise((r) => setTimeout(r, 300));
    await redis.config("SET", "maxmemory-policy", "noeviction");
    await waitFor("the daemon reports the drift ended", async () => (await metric(gauge)) === 0);
    expect(await metric(counter)).toBe(1);
    const drift = lines.filter((l) => l.event === "redis_setup_drift");
    expect(drift).toHaveLength(1);
    expect(drift[0]).toMatchObject({ setting: "maxmemory-policy" });
    expect(String(drift[0]?.msg)).toMatch(/maxmemory-policy allkeys-lru/);
    expect(lines.filter((l) => l.event === "redis_setup_drift_ended")).toHaveLength(1);
  } finally {
    await running.close();
  }
}, 60_000);
