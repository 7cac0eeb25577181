// Pure parts of the transport: catalog vs README, backoff, bucket, handshake MACs and parsing, config.
import { readFileSync } from "node:fs";
import { encode } from "@msgpack/msgpack";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { backoffDelayMs } from "../src/transport/backoff.js";
import { dialsTo, parseMeshConfig } from "../src/transport/config.js";
import {
  closeReasonText,
  errorCodeForClose,
  localReason,
  TRANSPORT_ERRORS,
} from "../src/transport/errors.js";
import {
  computeMac,
  encodeHello,
  newNonce,
  parseAuth,
  parseChallenge,
  parseHello,
  type TranscriptInput,
  verifyMac,
} from "../src/transport/handshake.js";
import type { TransportLogger } from "../src/transport/logger.js";
import { TokenBucket } from "../src/transport/token-bucket.js";

describe("error catalog", () => {
  it("matches the table in README-transport.md exactly", () => {
    const readme = readFileSync(new URL("../README-transport.md", import.meta.url), "utf8");
    const rows = new Map<string, number>();
    for (const m of readme.matchAll(/^\| `(GQ_ERR_[A-Z_]+)` \| (\d{4}) \|/gm)) rows.set(m[1]!, Number(m[2]));
    const catalog = new Map(Object.entries(TRANSPORT_ERRORS).map(([code, info]) => [code, info.closeCode]));
    expect(rows).toEqual(catalog);
  });

  it("has unique close codes and reasons, and sends only 4xxx codes of its own", () => {
    const infos = Object.values(TRANSPORT_ERRORS);
    expect(new Set(infos.map((i) => i.closeCode)).size).toBe(infos.length);
    expect(new Set(infos.map((i) => i.reason)).size).toBe(infos.length);
    for (const [code, info] of Object.entries(TRANSPORT_ERRORS)) {
      expect(errorCodeForClose(info.closeCode)).toBe(code);
    }
    expect(errorCodeForClose(1007)).toBe("GQ_ERR_WS_FRAMING");
    expect(errorCodeForClose(4999)).toBe("GQ_ERR_PEER_CLOSED");
  });

  it("keeps close reasons within the 123-byte limit of RFC 6455", () => {
    const r = localReason("GQ_ERR_PROTOCOL", "é".repeat(500));
    expect(Buffer.byteLength(closeReasonText(r))).toBeLessThanOrEqual(123);
  });
});

describe("backoff", () => {
  it("is full jitter under min(cap, base·2^attempt)", () => {
    expect(backoffDelayMs(0, 100, 5000, () => 0.999)).toBe(99);
    expect(backoffDelayMs(3, 100, 5000, () => 0.5)).toBe(400);
    expect(backoffDelayMs(10, 100, 5000, () => 0.5)).toBe(2500);
    expect(backoffDelayMs(10_000, 100, 5000, () => 0.999)).toBe(4995);
    expect(backoffDelayMs(5, 100, 5000, () => 0)).toBe(0);
  });
});

describe("token bucket", () => {
  it("allows the burst, then the rate, on an injected clock", () => {
    let t = 0;
    const b = new TokenBucket(10, 5, () => t);
    const takeN = (n: number) => Array.from({ length: n }, () => b.take()).filter(Boolean).length;
    expect(takeN(8)).toBe(5);
    t += 100; // 1 token
    expect(takeN(3)).toBe(1);
    t += 10_000; // capped at burst
    expect(takeN(20)).toBe(5);
  });
});

describe("handshake MACs", () => {
  const base: TranscriptInput = {
    version: 1,
    direction: "dialer->acceptor",
    dialer: "eu",
    acceptor: "us",
    dialerNonce: newNonce(),
    acceptorNonce: newNonce(),
  };
  const secret = "0123456789abcdef-secret";

  it("verifies the right transcript and rejects any changed field", () => {
    const mac = computeMac(secret, base);
    expect(verifyMac(secret, base, mac)).toBe(true);
    const variants: TranscriptInput[] = [
      { ...base, version: 2 },
      { ...base, direction: "acceptor->dialer" }, // reflection
      { ...base, dialer: "us", acceptor: "eu" },
      { ...base, dialer: "e", acceptor: "uus" }, // same concatenation, different split
      { ...base, dialerNonce: newNonce() },
      { ...base, acceptorNonce: newNonce() },
    ];
    for (const v of variants) expect(verifyMac(secret, v, mac)).toBe(false);
    expect(verifyMac("another-secret-of-16+", base, mac)).toBe(false);
    expect(verifyMac(secret, base, mac.subarray(0, 31))).toBe(false);
  });
});

describe("handshake parsing", () => {
  it("reports a version mismatch from {t, v} alone, before validating the rest", () => {
    const r = parseHello(encode({ t: "hello", v: 7, whatever: true }), 1);
    expect(r).toMatchObject({ ok: false, code: "GQ_ERR_VERSION" });
  });

  it("accepts a well-formed hello", () => {
    const n = newNonce();
    const r = parseHello(encodeHello({ v: 1, from: "a", to: "b", n }), 1);
    expect(r).toMatchObject({ ok: true, value: { from: "a", to: "b" } });
  });

  it("refuses garbage, wrong types, short nonces and oversize messages as GQ_ERR_PROTOCOL", () => {
    const bad = [
      new Uint8Array([0xc1, 0xff, 0x00]),
      encode("hello"),
      encode({ t: "auth", mac: new Uint8Array(32) }),
      encode({ t: "hello", v: 1, from: "a", to: "b", n: new Uint8Array(8) }),
      encode({ t: "hello", v: 1, from: "a", to: "b", n: new Uint8Array(2000) }),
      encode({ t: "hello", v: 1, from: "a", to: "b", n: newNonce() }).slice(0, 10),
    ];
    for (const b of bad) expect(parseHello(b, 1)).toMatchObject({ ok: false, code: "GQ_ERR_PROTOCOL" });
    expect(parseChallenge(encode({ t: "challenge", v: 1 }), 1)).toMatchObject({
      ok: false,
      code: "GQ_ERR_PROTOCOL",
    });
    expect(parseAuth(encode({ t: "auth", mac: "x" }))).toMatchObject({ ok: false, code: "GQ_ERR_PROTOCOL" });
  });
});

describe("config", () => {
  const ok = { self: "eu", listen: { host: "127.0.0.1", port: 0 }, secret: "s".repeat(16) };

  it("fills defaults", () => {
    const c = parseMeshConfig({ ...ok, peers: [{ id: "us", url: "ws://127.0.0.1:1" }] });
    expect(c).toMatchObject({
      protocolVersion: 1,
      frameBytesMax: 1024 * 1024,
      heartbeatMs: 1000,
      reconnect: { baseMs: 100, capMs: 5000 },
    });
  });

  it("rejects self as peer, duplicates, short secrets, bad ids, and ws/wss vs tls mismatches", () => {
    const url = "ws://127.0.0.1:1";
    expect(() => parseMeshConfig({ ...ok, peers: [{ id: "eu", url }] })).toThrow(/self/);
    expect(() =>
      parseMeshConfig({
        ...ok,
        peers: [
          { id: "us", url },
          { id: "us", url },
        ],
      }),
    ).toThrow(/duplicate/);
    expect(() => parseMeshConfig({ ...ok, secret: "short" })).toThrow();
    expect(() => parseMeshConfig({ ...ok, self: "a:b" })).toThrow(/region id/);
    expect(() => parseMeshConfig({ ...ok, peers: [{ id: "us", url: "http://x" }] })).toThrow(/ws/);
    expect(() => parseMeshConfig({ ...ok, peers: [{ id: "us", url: "wss://x" }] })).toThrow(/tls/);
    expect(() =>
      parseMeshConfig({
        ...ok,
        tls: { keyPath: "k", certPath: "c", caPath: "a" },
        peers: [{ id: "us", url }],
      }),
    ).toThrow(/wss/);
  });

  it("makes the lexicographically smaller id the dialer", () => {
    expect(dialsTo("ap", "eu")).toBe(true);
    expect(dialsTo("eu", "ap")).toBe(false);
    expect(dialsTo("eu-1", "eu-10")).toBe(true);
  });
});

describe("logger", () => {
  it("accepts a pino logger as the injected logger", () => {
    const logger: TransportLogger = pino({ level: "silent" });
    expect(() => logger.warn({ peer: "x" }, "typed")).not.toThrow();
  });
});
