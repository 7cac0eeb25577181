// Identifiers shared with the Redis key schema (docs/internals.md): region ids,
// tenants and resources match ID_PATTERN; a replica id is
// `<region>.<incarnation>`; a map key is `tenant|resource`.
import { type CrdtError, err, ok, type Result } from "./errors.js";

export const ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
/** Incarnations carry no dot, so a replica id splits at its last dot. */
export const INCARNATION_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const KEY_LENGTH_MAX = 260;
export const KEY_SEPARATOR = "|";

export function isValidId(id: unknown): id is string {
  return typeof id === "string" && ID_PATTERN.test(id);
}

export function checkId(id: unknown, what: string): CrdtError | undefined {
  if (isValidId(id)) return undefined;
  return { code: "GQ_ERR_INVALID_ID", message: `${what} ${JSON.stringify(id)} does not match ${ID_PATTERN}` };
}

/** `<region>.<incarnation>`; the incarnation may not contain a dot. */
export function replicaId(region: string, incarnation: string): Result<string> {
  const bad = checkId(region, "region");
  if (bad !== undefined) return { ok: false, error: bad };
  if (!INCARNATION_PATTERN.test(incarnation)) {
    return err(
      "GQ_ERR_INVALID_ID",
      `incarnation ${JSON.stringify(incarnation)} does not match ${INCARNATION_PATTERN}`,
    );
  }
  const id = `${region}.${incarnation}`;
  return id.length <= 128 ? ok(id) : err("GQ_ERR_INVALID_ID", "replica id longer than 128 characters");
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

export function isValidKey(key: unknown): key is string {
  if (typeof key !== "string" || key.length > KEY_LENGTH_MAX) return false;
  const bar = key.indexOf(KEY_SEPARATOR);
  if (bar < 0) return false;
  return ID_PATTERN.test(key.slice(0, bar)) && ID_PATTERN.test(key.slice(bar + 1));
}

/** Map key `tenant|resource` for a (tenant, resource) pair. */
export function encodeKey(tenant: string, resource: string): Result<string> {
  const bad = checkId(tenant, "tenant") ?? checkId(resource, "resource");
  return bad === undefined ? ok(`${tenant}${KEY_SEPARATOR}${resource}`) : { ok: false, error: bad };
}

export function decodeKey(key: string): Result<{ tenant: string; resource: string }> {
  if (!isValidKey(key)) return err("GQ_ERR_INVALID_KEY", `invalid key ${JSON.stringify(key).slice(0, 300)}`);
  const bar = key.indexOf(KEY_SEPARATOR);
  return ok({ tenant: key.slice(0, bar), resource: key.slice(bar + 1) });
}
