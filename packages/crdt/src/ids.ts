// Identifiers shared with the Redis key schema (docs/internals.md), checked:
// region ids, tenants and resources match ID_PATTERN; a replica id is
// `<region>.<incarnation>`; a map key is `tenant|resource`. The names
// themselves are defined once, in @geoquota/core's ids module.
import {
  INCARNATION_PATTERN,
  KEY_MAX_LENGTH,
  KEY_SEPARATOR,
  NAME_PATTERN,
  quotaKey,
  regionOfReplica,
  replicaIdOf,
} from "@geoquota/core";
import { type CrdtError, err, ok, type Result } from "./errors.js";

export { INCARNATION_PATTERN, KEY_SEPARATOR, regionOfReplica };
export const ID_PATTERN = NAME_PATTERN;
export const KEY_LENGTH_MAX = 260;

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
  const id = replicaIdOf(region, incarnation);
  return id.length <= KEY_MAX_LENGTH
    ? ok(id)
    : err("GQ_ERR_INVALID_ID", `replica id longer than ${KEY_MAX_LENGTH} characters`);
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
  return bad === undefined ? ok(quotaKey(tenant, resource)) : { ok: false, error: bad };
}

export function decodeKey(key: string): Result<{ tenant: string; resource: string }> {
  if (!isValidKey(key)) return err("GQ_ERR_INVALID_KEY", `invalid key ${JSON.stringify(key).slice(0, 300)}`);
  const bar = key.indexOf(KEY_SEPARATOR);
  return ok({ tenant: key.slice(0, bar), resource: key.slice(bar + 1) });
}
