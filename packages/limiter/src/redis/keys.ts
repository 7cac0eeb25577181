// Key schema of docs/internals.md. Every per-key name carries the `{tenant}`
// hash tag; `gq:inc`, `gq:rid`, `gq:dirty` and `gq:dg` are global (a documented
// limitation: no Redis Cluster in this version).
import { RedisStoreError } from "./errors.js";

export const MARKER_KEY = "gq:inc";
export const REPLID_KEY = "gq:rid";
export const DIRTY_KEY = "gq:dirty";
/** The change feed's drain generation (lua/drain_dirty.lua, lib.lua keep()). */
export const DRAIN_GEN_KEY = "gq:dg";

const NAME = /^[A-Za-z0-9_.-]{1,128}$/;

export function assertName(kind: string, value: string): void {
  if (!NAME.test(value)) throw new RedisStoreError("GQ_ERR_BAD_NAME", `${kind} ${JSON.stringify(value)}`);
}

/** P:b, P:c, P:l, P:k, P:z of one (tenant, resource), in script KEYS order. */
export function keyNames(tenant: string, resource: string): [string, string, string, string, string] {
  const p = `gq:{${tenant}}:${resource}`;
  return [`${p}:b`, `${p}:c`, `${p}:l`, `${p}:k`, `${p}:z`];
}

/** The change-feed member of a key. */
export function dirtyMember(tenant: string, resource: string): string {
  return `${tenant}|${resource}`;
}

export function parseDirtyMember(member: string): { tenant: string; resource: string } {
  const at = member.indexOf("|");
  return { tenant: member.slice(0, at), resource: member.slice(at + 1) };
}
