// Handshake messages and MACs. Pure: no sockets, no timers.
//
// Dialer D (smaller id) and acceptor A:
//   D → A  hello     { t, v, from: D, to: A, n: nonceD }
//   A → D  challenge { t, v, from: A, to: D, n: nonceA, mac: MAC(A→D) }
//   D → A  auth      { t, mac: MAC(D→A) }
//   A → D  ok        { t }
// MAC(dir) = HMAC-SHA256(secret, transcript(dir)), where the transcript binds
// the version, the direction, both ids and both nonces, so a MAC can neither
// be replayed into another session (fresh nonces on both sides) nor reflected
// back in the other direction.
//
// `hello` keeps `t` and `v` in every future version so that a peer of another
// version is refused with GQ_ERR_VERSION rather than GQ_ERR_PROTOCOL.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { decode, encode } from "@msgpack/msgpack";
import { z } from "zod";
import type { TransportErrorCode } from "./errors.js";

export const NONCE_BYTES = 32;
export const MAC_BYTES = 32;
/** Handshake messages are tiny; anything larger is garbage. */
export const HANDSHAKE_MESSAGE_BYTES_MAX = 1024;

const TRANSCRIPT_LABEL = "geoquota-gossip-auth";

export type Direction = "dialer->acceptor" | "acceptor->dialer";

const bytes = (n: number) =>
  z.instanceof(Uint8Array).refine((b) => b.byteLength === n, `expected ${n} bytes`);
const id = z.string().min(1).max(128);

const versionProbe = z.object({ t: z.string(), v: z.number() });
const helloSchema = z.object({
  t: z.literal("hello"),
  v: z.number().int(),
  from: id,
  to: id,
  n: bytes(NONCE_BYTES),
});
const challengeSchema = z.object({
  t: z.literal("challenge"),
  v: z.number().int(),
  from: id,
  to: id,
  n: bytes(NONCE_BYTES),
  mac: bytes(MAC_BYTES),
});
const authSchema = z.object({ t: z.literal("auth"), mac: bytes(MAC_BYTES) });
const okSchema = z.object({ t: z.literal("ok") });

export interface Hello {
  t: "hello";
  v: number;
  from: string;
  to: string;
  n: Uint8Array;
}
export interface Challenge {
  t: "challenge";
  v: number;
  from: string;
  to: string;
  n: Uint8Array;
  mac: Uint8Array;
}
export interface Auth {
  t: "auth";
  mac: Uint8Array;
}

/** Parse outcome: a value or the catalog code to close with. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; code: TransportErrorCode; detail: string };

const fail = (
  code: TransportErrorCode,
  detail: string,
): { ok: false; code: TransportErrorCode; detail: string } => ({
  ok: false,
  code,
  detail,
});

function decodeBounded(data: Uint8Array): Parsed<unknown> {
  if (data.byteLength > HANDSHAKE_MESSAGE_BYTES_MAX)
    return fail("GQ_ERR_PROTOCOL", "handshake message too large");
  try {
    return {
      ok: true,
      value: decode(data, { maxStrLength: 256, maxBinLength: 64, maxArrayLength: 16, maxMapLength: 16 }),
    };
  } catch {
    return fail("GQ_ERR_PROTOCOL", "handshake message is not msgpack");
  }
}

function parseVersioned<T>(data: Uint8Array, t: string, version: number, schema: z.ZodType<T>): Parsed<T> {
  const raw = decodeBounded(data);
  if (!raw.ok) return raw;
  const probe = versionProbe.safeParse(raw.value);
  if (!probe.success || probe.data.t !== t) return fail("GQ_ERR_PROTOCOL", `expected ${t}`);
  if (probe.data.v !== version)
    return fail("GQ_ERR_VERSION", `peer speaks v${probe.data.v}, we speak v${version}`);
  const full = schema.safeParse(raw.value);
  if (!full.success) return fail("GQ_ERR_PROTOCOL", `malformed ${t}`);
  return { ok: true, value: full.data };
}

export function parseHello(data: Uint8Array, version: number): Parsed<Hello> {
  return parseVersioned(data, "hello", version, helloSchema);
}

export function parseChallenge(data: Uint8Array, version: number): Parsed<Challenge> {
  return parseVersioned(data, "challenge", version, challengeSchema);
}

export function parseAuth(data: Uint8Array): Parsed<Auth> {
  const raw = decodeBounded(data);
  if (!raw.ok) return raw;
  const r = authSchema.safeParse(raw.value);
  return r.success ? { ok: true, value: r.data } : fail("GQ_ERR_PROTOCOL", "expected auth");
}

export function parseOk(data: Uint8Array): Parsed<true> {
  const raw = decodeBounded(data);
  if (!raw.ok) return raw;
  return okSchema.safeParse(raw.value).success
    ? { ok: true, value: true }
    : fail("GQ_ERR_PROTOCOL", "expected ok");
}

export const encodeHello = (m: Omit<Hello, "t">): Uint8Array => encode({ t: "hello", ...m });
export const encodeChallenge = (m: Omit<Challenge, "t">): Uint8Array => encode({ t: "challenge", ...m });
export const encodeAuth = (m: Omit<Auth, "t">): Uint8Array => encode({ t: "auth", ...m });
export const encodeOk = (): Uint8Array => encode({ t: "ok" });

export function newNonce(): Uint8Array {
  return new Uint8Array(randomBytes(NONCE_BYTES));
}

export interface TranscriptInput {
  version: number;
  direction: Direction;
  dialer: string;
  acceptor: string;
  dialerNonce: Uint8Array;
  acceptorNonce: Uint8Array;
}

// Length-prefixed fields, so no two different inputs share an encoding.
function transcript(t: TranscriptInput): Buffer {
  const parts: Buffer[] = [];
  const field = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.byteLength);
    parts.push(len, b);
  };
  field(Buffer.from(TRANSCRIPT_LABEL));
  const v = Buffer.alloc(4);
  v.writeUInt32BE(t.version);
  field(v);
  field(Buffer.from(t.direction));
  field(Buffer.from(t.dialer));
  field(Buffer.from(t.acceptor));
  field(Buffer.from(t.dialerNonce));
  field(Buffer.from(t.acceptorNonce));
  return Buffer.concat(parts);
}

export function computeMac(secret: string, t: TranscriptInput): Uint8Array {
  return new Uint8Array(createHmac("sha256", secret).update(transcript(t)).digest());
}

/** Constant-time comparison of a received MAC with the expected one. */
export function verifyMac(secret: string, t: TranscriptInput, received: Uint8Array): boolean {
  const expected = computeMac(secret, t);
  return received.byteLength === expected.byteLength && timingSafeEqual(received, expected);
}
