// runDemo end to end against a fake cluster: in-process HTTP servers that
// speak the limiter's /v1/check and /v1/quotas and the daemon's /v1/status,
// with per-region token buckets. A static split holds the global bound; giving
// every region the full capacity breaks it, and the demo must say so and fail.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "@geoquota/testkit";
import { afterEach, describe, expect, it } from "vitest";
import type { Cluster } from "../src/cluster/orchestrator.js";
import { runDemo } from "../src/demo/run-demo.js";
import type { StreamRecord, StreamRig, StreamRigOptions } from "../src/demo/stream-rig.js";

/**
 * A stream rig without sockets: once the clients start, it "admits" 4 KiB
 * frames at `fraction` of r spread over the regions (plus `burst` bytes at
 * once), on the demo's clock.
 */
function fakeRig(fraction: number, burst = 0) {
  const events: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  const start = async (o: StreamRigOptions): Promise<StreamRig> => {
    const records: StreamRecord[] = [];
    const limit = { capacity: 65_536, refillPerSecond: 65_536 };
    const now = () => performance.now() - o.originMs;
    events.push(`start ${o.tenant} ${o.regions.map((r) => r.id).join(",")}`);
    return {
      tenant: o.tenant,
      resource: "stream_bytes",
      limit,
      multiple: 10,
      offeredPerClient: 655_360,
      regionIds: o.regions.map((r) => r.id),
      records,
      errors: [],
      startClients(durationMs) {
        events.push("clients");
        for (let b = 0; b < burst; b += 4096)
          records.push({ region: 0, sentMs: now(), answeredMs: now(), bytes: 4096 });
        let i = 0;
        timer = setInterval(
          () => {
            const t = now();
            records.push({ region: i++ % o.regions.length, sentMs: t - 1, answeredMs: t, bytes: 4096 });
          },
          1000 / ((limit.refillPerSecond * fraction) / 4096),
        );
        setTimeout(() => clearInterval(timer), durationMs);
      },
      stats: () =>
        o.regions.map((r) => ({
          id: r.id,
          connections: 1,
          paused: 1,
          clientBufferedBytes: 1 << 20,
          clientSentBytes: 1 << 22,
        })),
      async stop() {
        clearInterval(timer);
        events.push("stop");
      },
    };
  };
  return { start, events };
}

const C = 1000;
const R = 1000 / 60;

async function fakeRegion(id: string, fraction: number): Promise<{ server: Server; url: string }> {
  let tokens = C * fraction;
  let last = performance.now();
  const server = createServer((req, res) => {
    const json = (code: number, body: unknown) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method === "POST" && req.url === "/v1/check") {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const b = JSON.parse(body) as { tenant: string; cost: number };
        if (b.tenant !== "cust_ent_9942") return json(429, { allowed: false, region: id });
        const now = performance.now();
        tokens = Math.min(C * fraction, tokens + (R * fraction * (now - last)) / 1000);
        last = now;
        const allowed = tokens >= b.cost;
        if (allowed) tokens -= b.cost;
        json(allowed ? 200 : 429, { allowed, region: id, degraded: false });
      });
      return;
    }
    if (req.url?.startsWith("/v1/quotas/"))
      return json(200, { share: Math.round(fraction * 1e6), recovering: false, tokens });
    if (req.url === "/v1/status") return json(200, { peers: { other: { up: true, lagMs: 250 } } });
    json(404, {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function fakeCluster(fraction: number): Promise<Cluster & { stopped: boolean }> {
  const ids = ["us-east", "eu-west", "ap-south"];
  const servers = await Promise.all(ids.map((id) => fakeRegion(id, fraction)));
  const c = {
    stopped: false,
    policiesPath: join(repoRoot, "regions", "policies.json"),
    regions: ids.map((id, i) => ({ id, url: servers[i]!.url, gossipUrl: servers[i]!.url })),
    async stop() {
      c.stopped = true;
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.server.close(() => r()))));
    },
  };
  return c as unknown as Cluster & { stopped: boolean };
}

describe("runDemo against a fake cluster", () => {
  let dir = "";
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("held: prints the summary, writes the report pair, stops the cluster, exit 0", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-run-"));
    const cluster = await fakeCluster(1 / 3);
    let out = "";
    const r = await runDemo({
      durationMs: 3000,
      scenarios: ["shift"],
      tty: false,
      reportPath: join(dir, "demo.html"),
      write: (s) => {
        out += s;
      },
      startCluster: async () => cluster,
    });
    expect(cluster.stopped).toBe(true);
    expect(r.exitCode).toBe(0);
    expect(out).toMatch(/^global bound held: admitted \d+ ≤ bound \d+\.\d\d$/m);
    expect(out).toMatch(/^utilization during shift \(demand all in us-east\)/m);
    expect(out).toMatch(/^\[ {2}\d+s\] shift \| us-east share=33\.3%/m); // the plain per-second line
    const html = readFileSync(r.reportPath, "utf8");
    expect(html).toContain("global bound held");
    expect(html).not.toMatch(/https?:\/\//);
    const json = JSON.parse(readFileSync(r.jsonPath, "utf8"));
    expect(json.requests.rows.length).toBeGreaterThan(100);
  });

  it("violated: every region with the full capacity overshoots; VIOLATED and exit 1", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-run-"));
    const cluster = await fakeCluster(1);
    let out = "";
    const r = await runDemo({
      durationMs: 3000,
      scenarios: ["steady"],
      tty: false,
      totalRatePerSecond: 600,
      reportPath: join(dir, "demo.html"),
      write: (s) => {
        out += s;
      },
      startCluster: async () => cluster,
    });
    expect(cluster.stopped).toBe(true);
    expect(r.exitCode).toBe(1);
    expect(out).toMatch(/^global bound VIOLATED: admitted \d+ > bound \d+\.\d\d$/m);
    expect(out).toMatch(/^ {2}worst interval \[/m);
    expect(readFileSync(r.reportPath, "utf8")).toContain('class="verdict bad"');
  });

  it("stream: a second verdict line and the achieved rate; the rig stops before the cluster", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-run-"));
    const cluster = await fakeCluster(1 / 3);
    const rig = fakeRig(0.9);
    let policiesFile = "";
    let out = "";
    const r = await runDemo({
      durationMs: 3000,
      scenarios: ["stream"],
      tty: false,
      reportPath: join(dir, "demo.html"),
      write: (s) => {
        out += s;
      },
      startCluster: async (o) => {
        policiesFile = readFileSync(o.policiesFile!, "utf8"); // a merged temp file, removed after the start
        const stop = cluster.stop.bind(cluster);
        cluster.stop = async () => {
          rig.events.push("cluster stop");
          await stop();
        };
        return cluster;
      },
      startStream: rig.start,
    });
    expect(JSON.parse(policiesFile).policies.map((p: { resource: string }) => p.resource)).toEqual(
      expect.arrayContaining(["payments_checkout", "stream_bytes", "stream_frames"]),
    );
    expect(rig.events).toEqual([
      "start cust_ent_9942 us-east,eu-west,ap-south",
      "clients",
      "stop",
      "cluster stop",
    ]);
    expect(r.exitCode).toBe(0);
    expect(out).toMatch(/^global bound held: admitted \d+ ≤ bound \d+\.\d\d$/m);
    expect(out).toMatch(/^stream bound held: admitted \d+ B ≤ bound \d+\.\d\d B$/m);
    expect(out).toMatch(
      /^stream rate: \d+ B\/s of r = 65536 B\/s = [\d.]+% while each of 3 clients offered 10× r/m,
    );
    expect(out).toMatch(/^\[ {2}\d+s\] stream \| .* \| stream us-east=\d+KiB\/s share=[\d.]+% paused=1\/1 /m);
    const html = readFileSync(r.reportPath, "utf8");
    expect(html).toContain("Streamed KiB/s per region");
    expect(html).toContain("stream bound held");
    const json = JSON.parse(readFileSync(r.jsonPath, "utf8"));
    expect(json.streamFrames.rows.length).toBeGreaterThan(20);
    expect(r.streamVerdict?.ok).toBe(true);
  });

  it("stream violated: the demo says so and exits 1 even when the request bound held", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-run-"));
    const cluster = await fakeCluster(1 / 3);
    const rig = fakeRig(0.5, 3 * 65_536);
    let out = "";
    const r = await runDemo({
      durationMs: 3000,
      scenarios: ["stream"],
      tty: false,
      reportPath: join(dir, "demo.html"),
      write: (s) => {
        out += s;
      },
      startCluster: async () => cluster,
      startStream: rig.start,
    });
    expect(r.verdict.ok).toBe(true);
    expect(r.exitCode).toBe(1);
    expect(out).toMatch(/^stream bound VIOLATED: admitted \d+ B > bound \d+\.\d\d B$/m);
    expect(readFileSync(r.reportPath, "utf8")).toContain('class="verdict bad"');
  });

  it("aborted: stops early, still stops the cluster and reports, exit 130", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-run-"));
    const cluster = await fakeCluster(1 / 3);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 800);
    const t0 = performance.now();
    const r = await runDemo({
      durationMs: 60_000,
      scenarios: ["steady"],
      tty: true,
      reportPath: join(dir, "demo.html"),
      write: () => {},
      signal: ac.signal,
      startCluster: async () => cluster,
    });
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(cluster.stopped).toBe(true);
    expect(r.exitCode).toBe(130);
    expect(r.summary[0]).toMatch(/^interrupted/);
  });
});
