// Misbehaving and hostile peers, played by hand-written sockets against a real Mesh.
import { connect, type Socket } from "node:net";
import { waitFor } from "@geoquota/testkit";
import { type AddressInfo, WebSocket, WebSocketServer } from "ws";
import { afterEach, describe, expect, it } from "vitest";
import {
  computeMac,
  encodeAuth,
  encodeChallenge,
  encodeHello,
  newNonce,
  parseChallenge,
  parseHello,
} from "../src/transport/handshake.js";
import {
  Mesh,
  type MeshConfigInput,
  type MeshHandlers,
  type PeerDownReason,
} from "../src/transport/index.js";

const SECRET = "test-secret-0123456789";
const HOST = "127.0.0.1";

interface Events {
  frames: string[];
  ups: string[];
  downs: { peer: string; reason: PeerDownReason }[];
  failures: { peer: string | null; reason: PeerDownReason }[];
  handlers: MeshHandlers;
}

function events(): Events {
  const e: Events = {
    frames: [],
    ups: [],
    downs: [],
    failures: [],
    handlers: {
      onFrame: (_p, b) => e.frames.push(Buffer.from(b).toString()),
      onPeerUp: (p) => e.ups.push(p),
      onPeerDown: (peer, reason) => e.downs.push({ peer, reason }),
      // "c" is a dial target that never answers; its refused dials are not under test.
      onHandshakeFailure: (peer, reason) => {
        if (peer !== "c") e.failures.push({ peer, reason });
      },
    },
  };
  return e;
}

const meshes: Mesh[] = [];
const sockets: (WebSocket | Socket)[] = [];
const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s instanceof WebSocket ? s.terminate() : s.destroy();
  await Promise.all(meshes.splice(0).map((m) => m.stop()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Region "b" accepting from "a" (and dialing "c", which never answers). */
async function acceptor(overrides: Partial<MeshConfigInput> = {}) {
  const ev = events();
  const mesh = new Mesh(
    {
      self: "b",
      listen: { host: HOST, port: 0 },
      peers: [
        { id: "a", url: "ws://127.0.0.1:1" },
        { id: "c", url: "ws://127.0.0.1:1" },
      ],
      secret: SECRET,
      reconnect: { baseMs: 1000, capMs: 1000 },
      ...overrides,
    },
    { handlers: ev.handlers },
  );
  meshes.push(mesh);
  await mesh.start();
  return { mesh, ev, url: `ws://${HOST}:${mesh.port()}` };
}

interface Fake {
  ws: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
}

function open(url: string, options: { autoPong?: boolean } = {}): Fake {
  const ws = new WebSocket(url, { autoPong: options.autoPong ?? true });
  ws.on("error", () => {});
  sockets.push(ws);
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return { ws, closed };
}

const opened = (ws: WebSocket) =>
  new Promise<void>((r) => (ws.readyState === ws.OPEN ? r() : ws.once("open", r)));
const nextMessage = (ws: WebSocket) => new Promise<Buffer>((r) => ws.once("message", (d) => r(d as Buffer)));

/** A hand-played dialer: full handshake as `from` (optionally with a bad MAC). */
async function fakeDialer(
  url: string,
  opts: { from?: string; to?: string; secret?: string; autoPong?: boolean } = {},
): Promise<Fake> {
  const from = opts.from ?? "a";
  const to = opts.to ?? "b";
  const f = open(url, opts.autoPong === undefined ? {} : { autoPong: opts.autoPong });
  await opened(f.ws);
  const dialerNonce = newNonce();
  f.ws.send(encodeHello({ v: 1, from, to, n: dialerNonce }));
  const challenge = parseChallenge(await nextMessage(f.ws), 1);
  if (!challenge.ok) throw new Error(`fake dialer: ${challenge.detail}`);
  const t = { version: 1, dialer: from, acceptor: to, dialerNonce, acceptorNonce: challenge.value.n };
  const ok = nextMessage(f.ws);
  f.ws.send(encodeAuth({ mac: computeMac(opts.secret ?? SECRET, { ...t, direction: "dialer->acceptor" }) }));
  if (opts.secret === undefined) await ok;
  return f;
}

describe("Mesh against misbehaving peers", () => {
  it("closes with 4000 on a text frame during the handshake", async () => {
    const b = await acceptor();
    const f = open(b.url);
    await opened(f.ws);
    f.ws.send("hello?");
    expect(await f.closed).toMatchObject({ code: 4000 });
    await waitFor("failure", () => b.ev.failures.length === 1, 5000, 5);
    expect(b.ev.failures[0]!.reason).toMatchObject({ code: "GQ_ERR_PROTOCOL", by: "local" });
  });

  it("closes with 4000 on a binary garbage handshake", async () => {
    const b = await acceptor();
    const f = open(b.url);
    await opened(f.ws);
    f.ws.send(Buffer.from([0xc1, 0xde, 0xad, 0xbe, 0xef]));
    expect(await f.closed).toMatchObject({ code: 4000 });
  });

  it("survives raw TCP garbage and still accepts a real peer afterwards", async () => {
    const b = await acceptor();
    const raw = connect(b.mesh.port(), HOST);
    sockets.push(raw);
    raw.on("error", () => {});
    raw.resume(); // read the 400 so 'end' and 'close' can fire
    const ended = new Promise((r) => raw.once("close", r));
    raw.write("\x00\xff garbage that is not HTTP\r\n\r\n");
    await ended; // the HTTP server answers 400 and drops it
    const f = await fakeDialer(b.url);
    await waitFor("up", () => b.mesh.isUp("a"), 5000, 5);
    f.ws.send(Buffer.from("data"));
    await waitFor("frame", () => b.ev.frames.length === 1, 5000, 5);
  });

  it("refuses a bad MAC from the dialer with 4001", async () => {
    const b = await acceptor();
    const f = await fakeDialer(b.url, { secret: "not-the-shared-secret" });
    expect(await f.closed).toMatchObject({ code: 4001 });
    await waitFor("failure", () => b.ev.failures.length === 1, 5000, 5);
    expect(b.ev.failures[0]).toMatchObject({ peer: "a", reason: { code: "GQ_ERR_AUTH", by: "local" } });
    expect(b.ev.ups).toEqual([]);
  });

  it("refuses a dial from the larger id (4004) and a hello addressed to someone else (4003)", async () => {
    const b = await acceptor();
    const wrongRole = open(b.url);
    await opened(wrongRole.ws);
    wrongRole.ws.send(encodeHello({ v: 1, from: "c", to: "b", n: newNonce() }));
    expect(await wrongRole.closed).toMatchObject({ code: 4004 });
    const wrongTarget = open(b.url);
    await opened(wrongTarget.ws);
    wrongTarget.ws.send(encodeHello({ v: 1, from: "a", to: "x", n: newNonce() }));
    expect(await wrongTarget.closed).toMatchObject({ code: 4003 });
  });

  it("times out a silent handshake (4005) and refuses connections over pendingHandshakesMax (4009)", async () => {
    const b = await acceptor({ handshakeTimeoutMs: 200, pendingHandshakesMax: 1 });
    const silent = open(b.url);
    await opened(silent.ws);
    const extra = open(b.url);
    expect(await extra.closed).toMatchObject({ code: 4009 });
    expect(await silent.closed).toMatchObject({ code: 4005 });
    await waitFor("failures", () => b.ev.failures.length === 2, 5000, 5);
    expect(b.ev.failures.map((f) => f.reason.code).sort()).toEqual([
      "GQ_ERR_HANDSHAKE_TIMEOUT",
      "GQ_ERR_OVERLOADED",
    ]);
  });

  it("disconnects an authenticated peer that sends a text frame (4000)", async () => {
    const b = await acceptor();
    const f = await fakeDialer(b.url);
    await waitFor("up", () => b.mesh.isUp("a"), 5000, 5);
    f.ws.send("text is not allowed");
    expect(await f.closed).toMatchObject({ code: 4000 });
    await waitFor("down", () => b.ev.downs.length === 1, 5000, 5);
    expect(b.ev.downs[0]).toMatchObject({ peer: "a", reason: { code: "GQ_ERR_PROTOCOL", by: "local" } });
    expect(b.ev.frames).toEqual([]);
  });

  it("disconnects a peer that sends invalid WebSocket framing (1002)", async () => {
    const b = await acceptor();
    const f = await fakeDialer(b.url);
    await waitFor("up", () => b.mesh.isUp("a"), 5000, 5);
    // An unmasked frame with a reserved opcode, written under ws's feet.
    const raw = (f.ws as unknown as { _socket: Socket })._socket;
    raw.write(Buffer.from([0x83, 0x01, 0x00]));
    await waitFor("down", () => b.ev.downs.length === 1, 5000, 5);
    expect(b.ev.downs[0]!.reason).toMatchObject({ code: "GQ_ERR_WS_FRAMING", by: "local" });
    expect(b.mesh.peers().find((p) => p.id === "a")!.connected).toBe(false);
  });

  it("terminates a link that stops answering pings (GQ_ERR_HEARTBEAT)", async () => {
    const b = await acceptor({ heartbeatMs: 50 });
    const f = await fakeDialer(b.url, { autoPong: false });
    await waitFor("up", () => b.mesh.isUp("a"), 5000, 5);
    await waitFor("down", () => b.ev.downs.length === 1, 5000, 5);
    expect(b.ev.downs[0]).toMatchObject({ peer: "a", reason: { code: "GQ_ERR_HEARTBEAT", by: "local" } });
    expect(await f.closed).toMatchObject({ code: 1006 }); // terminated, no close frame
  });

  it("keeps a quiet link that answers pings, and measures its RTT", async () => {
    const b = await acceptor({ heartbeatMs: 20 });
    const f = await fakeDialer(b.url);
    let pings = 0;
    f.ws.on("ping", () => {
      pings += 1;
    });
    // 8 heartbeat periods of data silence (the limit is 3): pongs alone keep it up.
    await waitFor("8 pings", () => pings >= 8, 5000, 5);
    expect(b.ev.downs).toEqual([]);
    expect(b.mesh.isUp("a")).toBe(true);
    expect(b.mesh.peers().find((p) => p.id === "a")!.rttMs).not.toBeNull();
  });

  it("replaces the link when the same peer authenticates again (4006)", async () => {
    const b = await acceptor();
    const first = await fakeDialer(b.url);
    await waitFor("up", () => b.ev.ups.length === 1, 5000, 5);
    const second = await fakeDialer(b.url);
    expect(await first.closed).toMatchObject({ code: 4006 });
    expect(b.ev.ups).toEqual(["a", "a"]);
    expect(b.ev.downs).toMatchObject([{ peer: "a", reason: { code: "GQ_ERR_REPLACED" } }]);
    second.ws.send(Buffer.from("from-second"));
    await waitFor("frame", () => b.ev.frames.length === 1, 5000, 5);
    expect(b.ev.frames).toEqual(["from-second"]);
    expect(b.mesh.send("a", Buffer.from("back"))).toBe(true);
    expect((await nextMessage(second.ws)).toString()).toBe("back");
  });

  it("refuses to buffer without bound when the peer stops reading (backpressure)", async () => {
    const b = await acceptor({ frameBytesMax: 64 * 1024, sendBufferedBytesMax: 256 * 1024 });
    const f = await fakeDialer(b.url);
    await waitFor("up", () => b.mesh.isUp("a"), 5000, 5);
    f.ws.pause();
    const frame = new Uint8Array(64 * 1024);
    let accepted = 0;
    while (b.mesh.send("a", frame) && accepted < 10_000) accepted += 1;
    expect(accepted).toBeLessThan(10_000);
    expect(b.mesh.peers().find((p) => p.id === "a")!.drops.backpressure).toBe(1);
    expect(b.mesh.isUp("a")).toBe(true);
  });

  it("as dialer, closes with 4000 when the acceptor answers garbage, then redials", async () => {
    const wss = new WebSocketServer({ host: HOST, port: 0 });
    servers.push(wss);
    await new Promise((r) => wss.once("listening", r));
    const closes: number[] = [];
    wss.on("connection", (ws) => {
      ws.on("error", () => {});
      ws.on("close", (code) => closes.push(code));
      ws.once("message", (data) => {
        expect(parseHello(data as Buffer, 1).ok).toBe(true);
        ws.send(Buffer.from("not a challenge"));
      });
    });
    const ev = events();
    const a = new Mesh(
      {
        self: "a",
        listen: { host: HOST, port: 0 },
        peers: [{ id: "b", url: `ws://${HOST}:${(wss.address() as AddressInfo).port}` }],
        secret: SECRET,
        reconnect: { baseMs: 10, capMs: 20 },
      },
      { handlers: ev.handlers },
    );
    meshes.push(a);
    await a.start();
    await waitFor("two refusals", () => closes.length >= 2, 5000, 5);
    expect(closes.slice(0, 2)).toEqual([4000, 4000]);
    expect(ev.failures[0]).toMatchObject({ peer: "b", reason: { code: "GQ_ERR_PROTOCOL", by: "local" } });
  });

  it("as dialer, refuses a challenge from a region other than the one dialed (4003)", async () => {
    const wss = new WebSocketServer({ host: HOST, port: 0 });
    servers.push(wss);
    await new Promise((r) => wss.once("listening", r));
    const closes: number[] = [];
    wss.on("connection", (ws) => {
      ws.on("error", () => {});
      ws.on("close", (code) => closes.push(code));
      ws.once("message", () => {
        ws.send(encodeChallenge({ v: 1, from: "impostor", to: "a", n: newNonce(), mac: new Uint8Array(32) }));
      });
    });
    const a = new Mesh({
      self: "a",
      listen: { host: HOST, port: 0 },
      peers: [{ id: "b", url: `ws://${HOST}:${(wss.address() as AddressInfo).port}` }],
      secret: SECRET,
    });
    meshes.push(a);
    await a.start();
    await waitFor("refusal", () => closes.length >= 1, 5000, 5);
    expect(closes[0]).toBe(4003);
  });
});
