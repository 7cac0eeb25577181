import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimiterError } from "../src/errors.js";
import { ipKey, validateKeyPart } from "../src/key-hygiene.js";
import { hashKey, KEY_PATTERN, keyHashSecretOf } from "@geoquota/core";
import { storedKeyPart } from "../src/key-hygiene.js";

describe("key hygiene", () => {
  it("aggregates IPv4 to /24", () => {
    expect(ipKey("203.0.113.7")).toBe("ip4-203.0.113.0-24");
    expect(ipKey("203.0.113.255")).toBe(ipKey("203.0.113.1"));
    expect(ipKey("203.0.114.1")).not.toBe(ipKey("203.0.113.1"));
    expect(ipKey("10.1.2.3", 16)).toBe("ip4-10.1.0.0-16");
  });

  it("aggregates IPv6 to /64, including :: forms, zones and IPv4-mapped addresses", () => {
    expect(ipKey("2001:db8:0:1:aaaa:bbbb:cccc:dddd")).toBe("ip6-2001.0db8.0000.0001-64");
    expect(ipKey("2001:db8:0:1::1")).toBe("ip6-2001.0db8.0000.0001-64");
    expect(ipKey("2001:db8::")).toBe("ip6-2001.0db8.0000.0000-64");
    expect(ipKey("fe80::1%eth0")).toBe("ip6-fe80.0000.0000.0000-64");
    expect(ipKey("::1")).toBe("ip6-0000.0000.0000.0000-64");
    expect(ipKey("::ffff:198.51.100.9")).toBe("ip4-198.51.100.0-24");
    expect(ipKey("2001:db8:0:1:ffff:ffff:ffff:ffff", 24, 48)).toBe("ip6-2001.0db8.0000-48");
    expect(ipKey("not-an-ip")).toBe("ip-invalid");
  });

  it("every IPv4 in a /24 maps to one key; results are valid key parts (property)", () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.integer({ min: 0, max: 255 }), (ip, last) => {
        const other = ip.split(".").slice(0, 3).concat(String(last)).join(".");
        expect(ipKey(ip)).toBe(ipKey(other));
        expect(validateKeyPart("k", ipKey(ip))).toBe(ipKey(ip));
      }),
    );
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        const k = ipKey(ip);
        expect(k).not.toBe("ip-invalid");
        expect(validateKeyPart("k", k)).toBe(k);
      }),
    );
  });

  it("HMAC-SHA256 truncated to 16 hex chars, keyed by the secret", () => {
    const a = hashKey("secret-one-0123456789", "tenant-x");
    expect(a).toMatch(/^h-[0-9a-f]{16}$/);
    expect(hashKey("secret-one-0123456789", "tenant-x")).toBe(a);
    expect(hashKey("secret-two-0123456789", "tenant-x")).not.toBe(a);
  });

  it("length limits and charset give clear 400s", () => {
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as LimiterError;
      }
      throw new Error("expected a throw");
    };
    expect(err(() => validateKeyPart("tenant", "x".repeat(129))).code).toBe("GQ_ERR_KEY_TOO_LONG");
    expect(err(() => validateKeyPart("tenant", "abc", 2)).message).toBe("tenant: longer than 2 characters");
    expect(err(() => validateKeyPart("resource", "a|b")).code).toBe("GQ_ERR_INVALID_KEY");
    expect(err(() => validateKeyPart("resource", "")).code).toBe("GQ_ERR_INVALID_BODY");
    expect(err(() => validateKeyPart("resource", "a|b")).statusCode).toBe(400);
  });

  it("storedKeyPart: readable keys stay, any other characters become the HMAC; lengths still capped", () => {
    const secret = "secret-one-0123456789";
    expect(storedKeyPart("tenant", "cust_ent_9942", 128, secret)).toBe("cust_ent_9942");
    for (const raw of ["user:123", "a@b.example", "q+/Zm9v=", "ünïcødé", "a b", "{tag}"]) {
      const stored = storedKeyPart("tenant", raw, 128, secret);
      expect(stored).toBe(hashKey(secret, raw));
      expect(KEY_PATTERN.test(stored)).toBe(true);
    }
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 128, unit: "grapheme" }), (raw) => {
        fc.pre(raw.length <= 128);
        const stored = storedKeyPart("k", raw, 128, secret);
        // Always a valid Redis key part (what the Lua scripts accept), and deterministic.
        expect(/^[A-Za-z0-9_.-]{1,128}$/.test(stored)).toBe(true);
        expect(storedKeyPart("k", raw, 128, secret)).toBe(stored);
      }),
    );
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as LimiterError;
      }
      throw new Error("expected a throw");
    };
    const long = err(() => storedKeyPart("limits[2].tenant", "é".repeat(129), 128, secret));
    expect(long.code).toBe("GQ_ERR_KEY_TOO_LONG");
    expect(long.field).toBe("limits[2].tenant");
    expect(err(() => storedKeyPart("tenant", "", 128, secret)).code).toBe("GQ_ERR_INVALID_BODY");
    const noSecret = err(() => storedKeyPart("resource", "a:b", 128, undefined));
    expect(noSecret.code).toBe("GQ_ERR_INVALID_KEY");
    expect(noSecret.message).toMatch(/^resource: /);
  });

  it("the hashing secret: keyHashSecret, else derived from the shared secret (never the shared secret itself)", () => {
    expect(keyHashSecretOf({ keyHashSecret: "k".repeat(16), sharedSecret: "s".repeat(16) })).toBe(
      "k".repeat(16),
    );
    const derived = keyHashSecretOf({ sharedSecret: "s".repeat(16) });
    expect(derived).toMatch(/^[0-9a-f]{64}$/);
    expect(derived).not.toBe("s".repeat(16));
    expect(keyHashSecretOf({ sharedSecret: "s".repeat(16) })).toBe(derived);
    expect(keyHashSecretOf({ sharedSecret: "t".repeat(16) })).not.toBe(derived);
    expect(keyHashSecretOf({})).toBeUndefined();
  });
});
