// Two gossip daemons started from region config files talk over mutual TLS
// with real certificates (made by ops/gossip-certs.sh with openssl); a client
// without a certificate and a daemon whose certificate another CA signed are
// refused. The daemons' structured log events are captured on the way: link
// up/down, handshake failures, recovery start/end.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RegionConfig, loadRegionConfig } from "@geoquota/config";
import { rotateIncarnation } from "@geoquota/redis";
import { type RedisServer, repoRoot, startRedis, waitFor } from "@geoquota/testkit";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type RunningGossip, startGossip } from "../src/daemon/main.js";

type Line = Record<string, unknown> & { msg: string };

const ids = ["eu-west", "us-east"] as const; // eu-west < us-east: eu-west dials
let dir = "";
const servers: RedisServer[] = [];
const running: RunningGossip[] = [];
const logs = new Map<string, Line[]>();

function capture(id: string): pino.Logger {
  const lines: Line[] = [];
  logs.set(id, lines);
  return pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s) as Line) });
}
const events = (id: string, event: string) => (logs.get(id) ?? []).filter((l) => l.event === event);

// Every listener on port 0 (no port picked before it is bound), the peers at
// port 0 too ("not known yet"): each daemon is handed the others' addresses
// once they listen (connectPeers), as the local cluster's orchestrator does.
async function writeConfig(
  id: string,
  tls: Record<string, string> | undefined,
  redisUrl: string,
): Promise<RegionConfig> {
  const file = join(dir, `${id}${tls?.tag ?? ""}.json`);
  const { tag: _t, ...paths } = tls ?? {};
  writeFileSync(
    file,
    JSON.stringify({
      region: id,
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: redisUrl },
      regions: ids.map((r) => ({ id: r, gossip: "127.0.0.1:0" })),
      gossip: {
        listen: { host: "127.0.0.1", port: 0 },
        round: { minMs: 100, maxMs: 200 },
        reconnect: { baseMs: 50, capMs: 200 },
        ...(tls ? { tls: paths } : { plaintext: true }),
      },
      lease: { epsilonMs: 50, loanDurationMs: 1000 },
      sharedSecret: "tls-test-shared-secret",
      adminToken: "tls-test-admin-token-0",
      policiesFile: join(repoRoot, "regions/policies.json"),
    }),
  );
  return loadRegionConfig(file, {});
}

/** Tells every daemon where the others listen. */
function connectPeers(daemons: readonly RunningGossip[]): void {
  for (const d of daemons)
    for (const o of daemons) if (o !== d) d.setPeerAddress(o.mesh.self, `127.0.0.1:${o.mesh.port()}`);
}

describe("gossip daemons over mutual TLS from region configs", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-gossip-tls-"));
    const script = join(repoRoot, "ops/gossip-certs.sh");
    execFileSync("bash", [script, join(dir, "certs"), ...ids], { stdio: "ignore" });
    execFileSync("bash", [script, join(dir, "rogue"), "us-east"], { stdio: "ignore" });
    for (const _ of ids) servers.push(await startRedis());
  });

  afterAll(async () => {
    await Promise.allSettled(running.splice(0).map((r) => r.close()));
    await Promise.allSettled(servers.splice(0).map((s) => s.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("links up over wss, refuses strangers, logs link, handshake and recovery events", async () => {
    const configs = await Promise.all(
      ids.map((id, i) =>
        // Relative paths: resolved against the config file's directory.
        writeConfig(
          id,
          { cert: `certs/${id}.crt`, key: `certs/${id}.key`, ca: "certs/ca.crt" },
          servers[i]!.url,
        ),
      ),
    );
    expect(configs[0]!.gossip.tls?.ca).toBe(join(dir, "certs/ca.crt"));
    for (const [i, id] of ids.entries()) {
      running.push(await startGossip(configs[i]!, { logger: capture(id) }));
    }
    connectPeers(running);
    const [eu, us] = running as [RunningGossip, RunningGossip];
    await waitFor("link up on both sides", () => eu.mesh.isUp("us-east") && us.mesh.isUp("eu-west"), 10_000);
    expect(events("eu-west", "gossip_link_up")).toEqual([
      expect.objectContaining({ peer: "us-east", tls: true, msg: "gossip link up" }),
    ]);
    expect(events("us-east", "gossip_link_up")).toEqual([
      expect.objectContaining({ peer: "eu-west", tls: true }),
    ]);

    // A client that trusts the CA but has no certificate of its own is refused by the TLS layer.
    const refused = await new Promise<string>((resolve) => {
      const ws = new WebSocket(`wss://127.0.0.1:${us.mesh.port()}`, {
        ca: readFileSync(join(dir, "certs/ca.crt")),
      });
      ws.on("open", () => {
        ws.close();
        resolve("open");
      });
      ws.on("error", () => resolve("error"));
      ws.on("close", () => resolve("closed"));
    });
    expect(refused).not.toBe("open");
    await waitFor(
      "handshake failure logged",
      () => events("us-east", "gossip_handshake_failed").length > 0,
      5000,
    );
    expect(events("us-east", "gossip_handshake_failed")[0]).toMatchObject({ code: "GQ_ERR_TLS", peer: null });

    // Recovery: a new incarnation on us-east's Redis puts the region in recovery for D + 2ε = 1.1 s.
    const client = servers[1]!.client();
    await rotateIncarnation(client);
    await waitFor("recovery started and ended", () => events("us-east", "recovery_ended").length > 0, 10_000);
    expect(events("us-east", "recovery_started")[0]).toMatchObject({ level: 40, shards: 256 });
    const metrics = await (await fetch(`http://127.0.0.1:${us.httpPort}/metrics`)).text();
    expect(metrics).toContain("geoquota_region_recovering 0");
    expect(metrics).toContain('geoquota_transport_link_up{peer="eu-west"} 1');
    expect(metrics).toContain("process_cpu_seconds_total");

    // Stopping us-east: eu-west logs the link going down.
    await us.close();
    running.splice(1, 1);
    await waitFor("link down logged", () => events("eu-west", "gossip_link_down").length > 0, 10_000);
    expect(events("eu-west", "gossip_link_down")[0]).toMatchObject({ peer: "us-east", level: 40 });
  });

  it("refuses a daemon whose certificate another CA signed, on both sides", async () => {
    // eu-west (still running, trusting the good CA) dials us-east: a rogue us-east takes its place.
    const rogue = await writeConfig(
      "us-east",
      { cert: "rogue/us-east.crt", key: "rogue/us-east.key", ca: "rogue/ca.crt", tag: "-rogue" },
      servers[1]!.url,
    );
    const r = await startGossip(rogue, { logger: capture("rogue") });
    running.push(r);
    const eu = running[0]!;
    connectPeers([eu, r]);
    await waitFor(
      "handshake failures on both sides",
      () =>
        events("rogue", "gossip_handshake_failed").length > 0 &&
        events("eu-west", "gossip_handshake_failed").length > 0,
      10_000,
    );
    expect(eu.mesh.isUp("us-east")).toBe(false);
    expect(r.mesh.isUp("eu-west")).toBe(false);
    expect(events("rogue", "gossip_link_up")).toEqual([]);
  });
});

describe("gossip TLS files", () => {
  it("a missing certificate is an error naming the config field", async () => {
    const d = mkdtempSync(join(tmpdir(), "gq-gossip-nofile-"));
    try {
      const file = join(d, "solo.json");
      writeFileSync(
        file,
        JSON.stringify({
          region: "solo",
          listen: { host: "127.0.0.1", port: 0 },
          redis: { url: "redis://127.0.0.1:1" },
          regions: [{ id: "solo", gossip: "127.0.0.1:0" }],
          gossip: {
            listen: { host: "127.0.0.1", port: 0 },
            tls: { cert: "no.crt", key: "no.key", ca: "ca.crt" },
          },
          sharedSecret: "tls-test-shared-secret",
          adminToken: "tls-test-admin-token-0",
          policiesFile: join(repoRoot, "regions/policies.json"),
        }),
      );
      await expect(startGossip(loadRegionConfig(file, {}))).rejects.toThrow(
        `${file}: gossip.tls.cert: cannot read ${join(d, "no.crt")}: ENOENT`,
      );
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});
