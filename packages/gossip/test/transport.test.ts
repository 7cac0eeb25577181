// Real meshes over real sockets on 127.0.0.1 (ports from port 0).
import { waitFor } from "@geoquota/testkit";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import {
  type MeshConfigInput,
  Mesh,
  type MeshHandlers,
  type PeerDownReason,
} from "../src/transport/index.js";

const SECRET = "test-secret-0123456789";
const HOST = "127.0.0.1";

interface Recorder {
  frames: { from: string; text: string }[];
  ups: string[];
  downs: { peer: string; reason: PeerDownReason }[];
  failures: { peer: string | null; reason: PeerDownReason }[];
  handlers: MeshHandlers;
}

function recorder(): Recorder {
  const r: Recorder = {
    frames: [],
    ups: [],
    downs: [],
    failures: [],
    handlers: {
      onFrame: (from, bytes) => r.frames.push({ from, text: Buffer.from(bytes).toString() }),
      onPeerUp: (peer) => r.ups.push(peer),
      onPeerDown: (peer, reason) => r.downs.push({ peer, reason }),
      onHandshakeFailure: (peer, reason) => r.failures.push({ peer, reason }),
    },
  };
  return r;
}

const started: Mesh[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((m) => m.stop()));
});

type Overrides = Partial<Omit<MeshConfigInput, "self" | "peers">>;

/** Starts one mesh per id, full mesh between them; `overrides[id]` tweaks one region's config. */
async function cluster(ids: string[], overrides: Record<string, Overrides> = {}) {
  // Listen first (port 0), then build the dialing meshes with the real ports: a
  // placeholder mesh per id reserves nothing, so listeners are started largest id
  // first and each mesh only dials ids larger than itself.
  const sorted = [...ids].sort().reverse();
  const ports = new Map<string, number>();
  const meshes = new Map<string, { mesh: Mesh; rec: Recorder; registry: Registry }>();
  for (const id of sorted) {
    const rec = recorder();
    const registry = new Registry();
    const mesh = new Mesh(
      {
        self: id,
        listen: { host: HOST, port: 0 },
        peers: ids.filter((p) => p !== id).map((p) => ({ id: p, url: `ws://${HOST}:${ports.get(p) ?? 1}` })),
        secret: SECRET,
        heartbeatMs: 1000,
        handshakeTimeoutMs: 2000,
        reconnect: { baseMs: 20, capMs: 200 },
        ...overrides[id],
      },
      { handlers: rec.handlers, registry },
    );
    started.push(mesh);
    await mesh.start();
    ports.set(id, mesh.port());
    meshes.set(id, { mesh, rec, registry });
  }
  return { get: (id: string) => meshes.get(id)!, ports };
}

const text = (s: string) => new TextEncoder().encode(s);

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (m?.values ?? []).find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

describe("Mesh", () => {
  it("connects three regions and exchanges frames in both directions", async () => {
    const c = await cluster(["ap", "eu", "us"]);
    const [ap, eu, us] = ["ap", "eu", "us"].map((id) => c.get(id));
    await waitFor(
      "all links up",
      () => [ap, eu, us].every((x) => x!.mesh.peers().every((p) => p.connected)),
      5000,
      5,
    );
    expect(ap!.mesh.peers().map((p) => [p.id, p.role])).toEqual([
      ["eu", "dialer"],
      ["us", "dialer"],
    ]);
    expect(us!.mesh.peers().every((p) => p.role === "acceptor")).toBe(true);

    expect(ap!.mesh.send("eu", text("ap->eu"))).toBe(true);
    expect(eu!.mesh.send("ap", text("eu->ap"))).toBe(true);
    expect(us!.mesh.broadcast(text("us->all"))).toBe(2);
    expect(eu!.mesh.send("us", text("eu->us"))).toBe(true);
    await waitFor("frames", () => ap!.rec.frames.length === 2 && eu!.rec.frames.length === 2, 5000, 5);
    await waitFor("frames at us", () => us!.rec.frames.length === 1, 5000, 5);
    // Different links: arrival order between them is not defined.
    const byFrom = (x: { from: string }, y: { from: string }) => x.from.localeCompare(y.from);
    expect(ap!.rec.frames.sort(byFrom)).toEqual([
      { from: "eu", text: "eu->ap" },
      { from: "us", text: "us->all" },
    ]);
    expect(eu!.rec.frames.sort(byFrom)).toEqual([
      { from: "ap", text: "ap->eu" },
      { from: "us", text: "us->all" },
    ]);
    expect(us!.rec.frames).toEqual([{ from: "eu", text: "eu->us" }]);

    const euToAp = eu!.mesh.peers().find((p) => p.id === "ap")!;
    expect(euToAp).toMatchObject({ framesIn: 1, framesOut: 1, bytesIn: 6, bytesOut: 6, connected: true });
    expect(euToAp.since).not.toBeNull();
    expect(await metricValue(eu!.registry, "geoquota_transport_received_frames_total", { peer: "ap" })).toBe(
      1,
    );
    expect(await metricValue(eu!.registry, "geoquota_transport_link_up", { peer: "us" })).toBe(1);
    expect(ap!.rec.failures).toEqual([]);
  });

  it("refuses a wrong secret with GQ_ERR_AUTH (4001) on both sides", async () => {
    const c = await cluster(["a", "b"], { b: { secret: "a-different-secret-42" } });
    const a = c.get("a");
    const b = c.get("b");
    await waitFor(
      "failures on both sides",
      () => a.rec.failures.length > 0 && b.rec.failures.length > 0,
      5000,
      5,
    );
    // a (dialer) checks b's MAC first and closes with 4001; b receives 4001.
    expect(a.rec.failures[0]).toMatchObject({
      peer: "b",
      reason: { code: "GQ_ERR_AUTH", closeCode: 4001, by: "local" },
    });
    expect(b.rec.failures[0]).toMatchObject({
      peer: "a",
      reason: { code: "GQ_ERR_AUTH", closeCode: 4001, by: "remote" },
    });
    expect(
      await metricValue(a.registry, "geoquota_transport_handshake_failures_total", { reason: "auth" }),
    ).toBeGreaterThan(0);
    expect(
      await metricValue(b.registry, "geoquota_transport_handshake_failures_total", { reason: "auth" }),
    ).toBeGreaterThan(0);
    expect([...a.rec.ups, ...b.rec.ups]).toEqual([]);
    expect(a.mesh.send("b", text("x"))).toBe(false);
    expect(b.rec.frames).toEqual([]);
  });

  it("refuses a different protocol version with GQ_ERR_VERSION (4002)", async () => {
    const c = await cluster(["a", "b"], { b: { protocolVersion: 2 } });
    const a = c.get("a");
    const b = c.get("b");
    await waitFor(
      "failures on both sides",
      () => a.rec.failures.length > 0 && b.rec.failures.length > 0,
      5000,
      5,
    );
    expect(b.rec.failures[0]).toMatchObject({
      peer: null,
      reason: { code: "GQ_ERR_VERSION", closeCode: 4002, by: "local" },
    });
    expect(a.rec.failures[0]).toMatchObject({
      peer: "b",
      reason: { code: "GQ_ERR_VERSION", closeCode: 4002, by: "remote" },
    });
    expect(a.mesh.peers()[0]!.lastError?.code).toBe("GQ_ERR_VERSION");
  });

  it("refuses a region that is not configured with GQ_ERR_UNKNOWN_PEER (4003)", async () => {
    const c = await cluster(["b"]);
    const b = c.get("b");
    const rec = recorder();
    const stranger = new Mesh(
      {
        self: "a",
        listen: { host: HOST, port: 0 },
        peers: [{ id: "b", url: `ws://${HOST}:${b.mesh.port()}` }],
        secret: SECRET,
        reconnect: { baseMs: 20, capMs: 200 },
      },
      { handlers: rec.handlers },
    );
    started.push(stranger);
    await stranger.start();
    await waitFor("refusal", () => rec.failures.length > 0 && b.rec.failures.length > 0, 5000, 5);
    expect(rec.failures[0]).toMatchObject({
      reason: { code: "GQ_ERR_UNKNOWN_PEER", closeCode: 4003, by: "remote" },
    });
    expect(b.rec.failures[0]).toMatchObject({
      peer: null,
      reason: { code: "GQ_ERR_UNKNOWN_PEER", by: "local" },
    });
    expect(
      await metricValue(b.registry, "geoquota_transport_handshake_failures_total", {
        reason: "unknown_peer",
      }),
    ).toBeGreaterThan(0);
  });

  it("rejects an oversize frame with 1009, survives, and reconnects", async () => {
    const c = await cluster(["a", "b"], {
      b: { frameBytesMax: 64 * 1024, sendBufferedBytesMax: 1024 * 1024 },
    });
    const a = c.get("a");
    const b = c.get("b");
    await waitFor("up", () => a.mesh.isUp("b") && b.mesh.isUp("a"), 5000, 5);
    // b's own send refuses what b would not accept either.
    expect(b.mesh.send("a", new Uint8Array(64 * 1024 + 1))).toBe(false);
    expect(b.mesh.peers()[0]!.drops.oversize).toBe(1);

    expect(a.mesh.send("b", new Uint8Array(100 * 1024))).toBe(true);
    await waitFor("down on both sides", () => a.rec.downs.length === 1 && b.rec.downs.length === 1, 5000, 5);
    expect(b.rec.downs[0]!.reason).toMatchObject({
      code: "GQ_ERR_FRAME_TOO_LARGE",
      closeCode: 1009,
      by: "local",
    });
    expect(a.rec.downs[0]!.reason).toMatchObject({
      code: "GQ_ERR_FRAME_TOO_LARGE",
      closeCode: 1009,
      by: "remote",
    });
    expect(b.rec.frames).toEqual([]);

    await waitFor("reconnected", () => a.mesh.isUp("b") && b.mesh.isUp("a"), 5000, 5);
    expect(a.mesh.send("b", text("small"))).toBe(true);
    await waitFor("small frame", () => b.rec.frames.length === 1, 5000, 5);
    expect(a.mesh.peers()[0]!.reconnects).toBeGreaterThan(0);
  });

  it("sees a stopped peer go down, and come back up after it restarts", async () => {
    const c = await cluster(["a", "b"]);
    const a = c.get("a");
    const b = c.get("b");
    await waitFor("up", () => a.mesh.isUp("b"), 5000, 5);
    const port = b.mesh.port();
    await b.mesh.stop();
    expect(b.rec.downs).toMatchObject([{ peer: "a", reason: { code: "GQ_ERR_SHUTDOWN", by: "local" } }]);
    await waitFor("a sees b down", () => a.rec.downs.length === 1, 5000, 5);
    expect(a.rec.downs[0]).toMatchObject({
      peer: "b",
      reason: { code: "GQ_ERR_SHUTDOWN", closeCode: 4008, by: "remote" },
    });
    // a keeps redialing (connection refused) with backoff while b is gone.
    await waitFor("a redials", () => a.mesh.peers()[0]!.reconnects >= 2, 5000, 5);
    expect(a.mesh.isUp("b")).toBe(false);

    const rec = recorder();
    const b2 = new Mesh(
      {
        self: "b",
        listen: { host: HOST, port },
        peers: [{ id: "a", url: "ws://127.0.0.1:1" }],
        secret: SECRET,
      },
      { handlers: rec.handlers },
    );
    started.push(b2);
    await b2.start();
    await waitFor("back up", () => a.rec.ups.length === 2 && rec.ups.length === 1, 5000, 5);
    expect(a.mesh.send("b", text("again"))).toBe(true);
    await waitFor("frame after restart", () => rec.frames.length === 1, 5000, 5);
  });

  it("drops inbound frames over the per-peer rate limit and keeps the link", async () => {
    // b's clock is frozen, so its bucket never refills: exactly the burst gets through.
    const registry = new Registry();
    const rec = recorder();
    const b = new Mesh(
      {
        self: "b",
        listen: { host: HOST, port: 0 },
        peers: [{ id: "a", url: "ws://127.0.0.1:1" }],
        secret: SECRET,
        inboundFramesPerSecondMax: 10,
      },
      { handlers: rec.handlers, registry, now: () => 0 },
    );
    started.push(b);
    await b.start();
    const a = new Mesh({
      self: "a",
      listen: { host: HOST, port: 0 },
      peers: [{ id: "b", url: `ws://${HOST}:${b.port()}` }],
      secret: SECRET,
    });
    started.push(a);
    await a.start();
    await waitFor("up", () => a.isUp("b") && b.isUp("a"), 5000, 5);
    for (let i = 0; i < 50; i++) expect(a.send("b", text(`f${i}`))).toBe(true);
    await waitFor("all 50 seen", () => b.peers()[0]!.framesIn === 50, 5000, 5);
    expect(rec.frames.map((f) => f.text)).toEqual(Array.from({ length: 10 }, (_, i) => `f${i}`));
    expect(b.peers()[0]!.drops.rate_limited).toBe(40);
    expect(
      await metricValue(registry, "geoquota_transport_dropped_frames_total", {
        peer: "a",
        reason: "rate_limited",
      }),
    ).toBe(40);
    expect(b.isUp("a")).toBe(true);
  });

  it("counts a throwing onFrame handler as a drop and keeps going", async () => {
    let calls = 0;
    const b = new Mesh(
      {
        self: "b",
        listen: { host: HOST, port: 0 },
        peers: [{ id: "a", url: "ws://127.0.0.1:1" }],
        secret: SECRET,
      },
      {
        handlers: {
          onFrame: () => {
            calls += 1;
            if (calls === 1) throw new Error("handler bug");
          },
        },
      },
    );
    started.push(b);
    await b.start();
    const a = new Mesh({
      self: "a",
      listen: { host: HOST, port: 0 },
      peers: [{ id: "b", url: `ws://${HOST}:${b.port()}` }],
      secret: SECRET,
    });
    started.push(a);
    await a.start();
    await waitFor("up", () => a.isUp("b"), 5000, 5);
    a.send("b", text("1"));
    a.send("b", text("2"));
    await waitFor("both handled", () => calls === 2, 5000, 5);
    expect(b.peers()[0]!.drops.handler_error).toBe(1);
    expect(b.isUp("a")).toBe(true);
  });

  it("refuses sends while down and treats unknown peer ids as misuse", async () => {
    const a = new Mesh({
      self: "a",
      listen: { host: HOST, port: 0 },
      peers: [{ id: "b", url: "ws://127.0.0.1:1" }],
      secret: SECRET,
      reconnect: { baseMs: 1000, capMs: 1000 },
    });
    started.push(a);
    await a.start();
    expect(a.send("b", text("x"))).toBe(false);
    expect(a.broadcast(text("x"))).toBe(0);
    expect(a.peers()[0]!.drops.link_down).toBe(2);
    expect(() => a.send("zz", text("x"))).toThrow(/not a configured peer/);
  });

  it("stop() closes the server and leaves no sockets or timers behind", async () => {
    const count = () => {
      const tally = new Map<string, number>();
      for (const r of process.getActiveResourcesInfo()) tally.set(r, (tally.get(r) ?? 0) + 1);
      return tally;
    };
    const before = count();
    const c = await cluster(["a", "b", "c"]);
    await waitFor(
      "up",
      () =>
        ["a", "b", "c"].every((id) =>
          c
            .get(id)
            .mesh.peers()
            .every((p) => p.connected),
        ),
      5000,
      5,
    );
    const ports = [...c.ports.values()];
    await Promise.all(["a", "b", "c"].map((id) => c.get(id).mesh.stop()));
    await new Promise((r) => setImmediate(r));
    const after = count();
    for (const kind of ["TCPServerWrap", "TCPSocketWrap", "Timeout"]) {
      expect(after.get(kind) ?? 0, kind).toBeLessThanOrEqual(before.get(kind) ?? 0);
    }
    // The ports are free again: a new mesh can bind one of them.
    const again = new Mesh({ self: "a", listen: { host: HOST, port: ports[0]! }, secret: SECRET });
    started.push(again);
    await again.start();
    expect(again.port()).toBe(ports[0]);
    // stop() is idempotent and a stopped mesh cannot be restarted.
    await again.stop();
    await again.stop();
    await expect(again.start()).rejects.toThrow(/already/);
  });
});
