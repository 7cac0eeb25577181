// The names every geoquota package shares, defined once (docs/internals.md,
// "Key schema"): the characters a stored name may use and its length limit,
// the quota key `tenant|resource`, a region's replica id
// `<region>.<incarnation>` and the CRDT counter fields (named fields of `P:b`)
// (`p|<replica>`, `n|<replica>`, `d|<replica>`). The Lua writes the same
// fields (lua/lib/keep.lua); the Redis package builds key names from these.
// A name outside NAME_CHARS is stored as its keyed hash (hashKey).
import { createHmac } from "node:crypto";

/** The characters of a stored tenant, resource or region name, as a regex class body. */
export const NAME_CHARS = "A-Za-z0-9_.-";
/** The longest tenant, resource, region or replica id, in characters. */
export const KEY_MAX_LENGTH = 128;
/** A name made only of NAME_CHARS (any length): stored as is, never hashed. */
export const KEY_PATTERN = new RegExp(`^[${NAME_CHARS}]+$`);
/** A whole stored name: 1 … KEY_MAX_LENGTH characters of NAME_CHARS. */
export const NAME_PATTERN = new RegExp(`^[${NAME_CHARS}]{1,${KEY_MAX_LENGTH}}$`);
/** What a name outside NAME_PATTERN is told. */
export const NAME_MESSAGE = `expected 1-${KEY_MAX_LENGTH} characters of [${NAME_CHARS}]`;

export function isName(value: unknown): value is string {
  return typeof value === "string" && NAME_PATTERN.test(value);
}

/** Separates tenant and resource in a quota key; never part of a stored name. */
export const KEY_SEPARATOR = "|";

/**
 * The quota key of (tenant, resource): `tenant|resource` (neither part may
 * contain `|`: key hygiene refuses or hashes such parts). Policy lookups,
 * lease pools, fail-open buckets, gossip records, the change feed's members
 * and the stored hash names all use this one encoding.
 */
export function quotaKey(tenant: string, resource: string): string {
  return `${tenant}${KEY_SEPARATOR}${resource}`;
}

/** Inverse of quotaKey; undefined when `key` has no separator. */
export function parseQuotaKey(key: string): { tenant: string; resource: string } | undefined {
  const i = key.indexOf(KEY_SEPARATOR);
  if (i < 0) return undefined;
  return { tenant: key.slice(0, i), resource: key.slice(i + 1) };
}

/** The incarnation part of a replica id: no dot, so a replica id splits at its last dot. */
export const INCARNATION_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** A region's replica id for one incarnation: `<region>.<incarnation>` (unchecked; crdt's `replicaId` checks). */
export function replicaIdOf(region: string, incarnation: string): string {
  return `${region}.${incarnation}`;
}

/**
 * The region a replica id belongs to: everything before the last dot. Region
 * ids may themselves contain dots ("eu.west"), which is why a plain prefix
 * match on "eu." would wrongly count "eu.west.k1" as region "eu".
 */
export function regionOfReplica(replica: string): string {
  const dot = replica.lastIndexOf(".");
  return dot <= 0 ? replica : replica.slice(0, dot);
}

/** The kinds of CRDT counter field: admitted (p), refunded or returned (n), denied (d). */
export const COUNTER_KINDS = ["p", "n", "d"] as const;
export type CounterKind = (typeof COUNTER_KINDS)[number];

/** A CRDT counter field: `<kind>|<replica>`. */
export function counterFieldOf(kind: CounterKind, replica: string): string {
  return `${kind}${KEY_SEPARATOR}${replica}`;
}

/** Inverse of counterFieldOf; undefined for a field of another shape. */
export function parseCounterField(field: string): { kind: CounterKind; replica: string } | undefined {
  const kind = field[0];
  if (field[1] !== KEY_SEPARATOR || field.length < 3) return undefined;
  if (kind !== "p" && kind !== "n" && kind !== "d") return undefined;
  return { kind, replica: field.slice(2) };
}

/** A stored name for a key part outside NAME_CHARS: HMAC-SHA256(secret, key) truncated to 16 hex chars (64 bits), prefixed `h-`. */
export function hashKey(secret: string, key: string): string {
  return `h-${createHmac("sha256", secret).update(key).digest("hex").slice(0, 16)}`;
}

/** Label mixed into the derived secret, so the key hash never equals a gossip MAC. */
const DERIVED_KEY_HASH_LABEL = "geoquota key-hash v1";

/**
 * The secret key parts are hashed with: `keyHashSecret`, else one derived from
 * `sharedSecret` (which every region already shares for gossip), so every
 * region maps the same key to the same stored name. Undefined without either.
 */
export function keyHashSecretOf(config: {
  readonly keyHashSecret?: string | undefined;
  readonly sharedSecret?: string | undefined;
}): string | undefined {
  if (config.keyHashSecret !== undefined) return config.keyHashSecret;
  if (config.sharedSecret === undefined) return undefined;
  return createHmac("sha256", config.sharedSecret).update(DERIVED_KEY_HASH_LABEL).digest("hex");
}

/**
 * The stored form of a key part as a function (storedKeyPart without its checks: plain
 * names as they are, others hashed), for lookups by stored names (the gossip daemon's:
 * Redis knows a key only by these). Undefined without a key-hash secret.
 */
export function keyPartHasher(config: {
  readonly keyHashSecret?: string | undefined;
  readonly sharedSecret?: string | undefined;
}): ((part: string) => string) | undefined {
  const secret = keyHashSecretOf(config);
  if (secret === undefined) return undefined;
  return (part) => (KEY_PATTERN.test(part) ? part : hashKey(secret, part));
}
