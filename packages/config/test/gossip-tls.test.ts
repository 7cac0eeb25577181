// Gossip between regions is mutual TLS unless a config explicitly opts out
// with `gossip.plaintext: true`; certificate paths resolve like policiesFile.
import { describe, expect, it } from "vitest";
import { ConfigError, parseRegionConfig } from "../src/index.js";

function raw(gossip: Record<string, unknown>): Record<string, unknown> {
  return {
    region: "us-east",
    listen: { host: "127.0.0.1", port: 7101 },
    redis: { url: "redis://127.0.0.1:6381" },
    regions: [
      { id: "us-east", gossip: "127.0.0.1:7201" },
      { id: "eu-west", gossip: "127.0.0.1:7202" },
    ],
    gossip: { listen: { host: "127.0.0.1", port: 7201 }, ...gossip },
    sharedSecret: "0123456789abcdef-secret",
    adminToken: "0123456789abcdef-admin",
  };
}

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("gossip TLS in the region config", () => {
  it("requires tls unless plaintext is explicitly allowed", () => {
    expect(messageOf(() => parseRegionConfig(raw({}), { file: "r.json" }))).toBe(
      "r.json: gossip.tls: expected { cert, key, ca } (mutual TLS between regions), or gossip.plaintext: true to allow unencrypted gossip",
    );
    const c = parseRegionConfig(raw({ plaintext: true }), { file: "r.json" });
    expect(c.gossip.plaintext).toBe(true);
    expect(c.gossip.tls).toBeUndefined();
  });

  it("resolves certificate paths against the config file's directory", () => {
    const c = parseRegionConfig(
      raw({ tls: { cert: "tls/us-east.crt", key: "tls/us-east.key", ca: "/etc/gq/ca.crt" } }),
      { file: "r.json", baseDir: "/srv/geoquota/regions" },
    );
    expect(c.gossip.tls).toEqual({
      cert: "/srv/geoquota/regions/tls/us-east.crt",
      key: "/srv/geoquota/regions/tls/us-east.key",
      ca: "/etc/gq/ca.crt",
    });
    expect(c.gossip.plaintext).toBe(false);
  });

  it.each([
    [{ tls: { cert: "a.crt", key: "a.key" } }, "gossip.tls.ca:"],
    [{ tls: { cert: "", key: "a.key", ca: "ca.crt" } }, "gossip.tls.cert: expected a certificate file path"],
    [{ tls: { cert: "a.crt", key: "a.key", ca: "ca.crt", pass: "x" } }, "gossip.tls:"],
    [
      { tls: { cert: "a.crt", key: "a.key", ca: "ca.crt" }, plaintext: true },
      "gossip.plaintext: plaintext: true contradicts gossip.tls; remove one",
    ],
    [{ plaintext: "yes" }, "gossip.plaintext:"],
  ])("rejects %j naming the field", (gossip, message) => {
    expect(messageOf(() => parseRegionConfig(raw(gossip), { file: "r.json" }))).toContain(
      `r.json: ${message}`,
    );
  });
});
