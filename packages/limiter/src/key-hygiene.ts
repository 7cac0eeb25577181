// Key hygiene (seed Q4): unbounded key spaces (client IPs, arbitrary tenant
// strings) must not become unbounded Redis keys. IPs aggregate to /24 (IPv4)
// and /64 (IPv6); key parts with characters outside [A-Za-z0-9_.-] (`user:123`,
// e-mail addresses, base64 API keys) are stored as HMAC-SHA256 truncated to 16
// hex chars; lengths capped.
import { isIPv4, isIPv6 } from "node:net";
import { hashKey, KEY_MAX_LENGTH, KEY_PATTERN, NAME_CHARS } from "@geoquota/core";
import { LimiterError } from "./errors.js";

/**
 * Throws a 400 LimiterError naming `field` when `value` cannot name a key in a
 * policy (`PUT /v1/policies/...`): any name a check takes, except one holding
 * `|` (the quota key's separator; @geoquota/config keyNameSchema). Checks use
 * `storedKeyPart`.
 */
export function validateKeyPart(field: string, value: unknown, maxLength = KEY_MAX_LENGTH): string {
  const part = boundedKeyPart(field, value, maxLength);
  if (part.includes("|")) {
    throw new LimiterError("GQ_ERR_INVALID_KEY", `${field}: "|" cannot be named by a policy`, { field });
  }
  return part;
}

/** `value` as a key part of 1 … maxLength characters, else the 400 naming `field`. */
function boundedKeyPart(field: string, value: unknown, maxLength: number): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new LimiterError("GQ_ERR_INVALID_BODY", `${field}: expected a non-empty string`, { field });
  }
  if (value.length > maxLength) {
    throw new LimiterError("GQ_ERR_KEY_TOO_LONG", `${field}: longer than ${maxLength} characters`, { field });
  }
  return value;
}

function expandIPv6(ip: string): number[] | undefined {
  let addr = ip;
  const zone = addr.indexOf("%");
  if (zone >= 0) addr = addr.slice(0, zone);
  // An embedded dotted IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const lastColon = addr.lastIndexOf(":");
  const tail = addr.slice(lastColon + 1);
  if (isIPv4(tail)) {
    const o = tail.split(".").map(Number);
    const hi = (((o[0] ?? 0) << 8) | (o[1] ?? 0)).toString(16);
    const lo = (((o[2] ?? 0) << 8) | (o[3] ?? 0)).toString(16);
    addr = `${addr.slice(0, lastColon + 1)}${hi}:${lo}`;
  }
  const halves = addr.split("::");
  if (halves.length > 2) return undefined;
  const parse = (s: string) => (s === "" ? [] : s.split(":").map((h) => Number.parseInt(h, 16)));
  const head = parse(halves[0] ?? "");
  const rest = halves.length === 2 ? parse(halves[1] ?? "") : [];
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0;
  if (fill < 0) return undefined;
  const out = [...head, ...new Array<number>(fill).fill(0), ...rest];
  return out.length === 8 && out.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? out : undefined;
}

/**
 * The aggregated subnet of an IP as a key part: `ip4-203.0.113.0-24`,
 * `ip6-2001.0db8.0000.0001-64`. IPv4-mapped IPv6 counts as IPv4.
 * Unparseable input yields `ip-invalid` (one shared bucket, never a new key).
 */
export function ipKey(ip: string, v4Prefix = 24, v6Prefix = 64): string {
  if (isIPv4(ip)) return v4Key(ip, v4Prefix);
  if (isIPv6(ip)) {
    const g = expandIPv6(ip);
    if (g === undefined) return "ip-invalid";
    if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
      return v4Key(
        `${(g[6] ?? 0) >> 8}.${(g[6] ?? 0) & 255}.${(g[7] ?? 0) >> 8}.${(g[7] ?? 0) & 255}`,
        v4Prefix,
      );
    }
    const masked = g.map((x, i) => {
      const bits = Math.max(0, Math.min(16, v6Prefix - i * 16));
      return bits === 0 ? 0 : x & ((0xffff << (16 - bits)) & 0xffff);
    });
    const shown = masked.slice(0, Math.ceil(v6Prefix / 16)).map((x) => x.toString(16).padStart(4, "0"));
    return `ip6-${shown.join(".")}-${v6Prefix}`;
  }
  return "ip-invalid";
}

function v4Key(ip: string, prefix: number): string {
  const o = ip.split(".").map(Number);
  const n = (((o[0] ?? 0) << 24) | ((o[1] ?? 0) << 16) | ((o[2] ?? 0) << 8) | (o[3] ?? 0)) >>> 0;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  const m = (n & mask) >>> 0;
  return `ip4-${m >>> 24}.${(m >>> 16) & 255}.${(m >>> 8) & 255}.${m & 255}-${prefix}`;
}

/**
 * A key part as stored in Redis: itself when it is only [A-Za-z0-9_.-], else
 * `hashKey(secret, value)`. Empty or longer than `maxLength` characters → 400
 * naming `field`; characters outside the set without a secret → 400 too.
 */
export function storedKeyPart(
  field: string,
  value: unknown,
  maxLength: number,
  secret: string | undefined,
): string {
  const part = boundedKeyPart(field, value, maxLength);
  if (KEY_PATTERN.test(part)) return part;
  if (secret === undefined) {
    throw new LimiterError(
      "GQ_ERR_INVALID_KEY",
      `${field}: characters outside [${NAME_CHARS}] need a key-hash secret (keyHashSecret or sharedSecret)`,
      { field },
    );
  }
  return hashKey(secret, part);
}
