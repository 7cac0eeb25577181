// Error catalog of the Redis store. Expected outcomes (denials, refused
// grants) are values; these are thrown only on misuse or on a broken install.
// At the package boundary each is a `StoreMisuseError` (@geoquota/core), the
// store interface's error type: the limiter engine knows only that one.
import { StoreMisuseError } from "@geoquota/core";

export const RedisStoreErrors = {
  GQ_ERR_SCRIPT_HEADER:
    "a lua/*.lua header disagrees with its TypeScript binding (keys or arguments drifted)",
  GQ_ERR_SCRIPT_REPLY: "a script returned a reply of unexpected shape",
  GQ_ERR_BAD_ARGUMENT: "an argument is out of range (cost, tokens, units, duration, count)",
  GQ_ERR_BAD_NAME: "a tenant, resource or region id does not match ^[A-Za-z0-9_.-]{1,128}$",
  GQ_ERR_COMPOUND_DUPLICATE: "a compound check names the same (tenant, resource) twice",
  GQ_ERR_LEASE_ALGORITHM: "in-process leases exist only for the token bucket",
  // The detail names the setting first (`replicas: …`, `maxmemory-policy: …`): the catalog text names none.
  GQ_ERR_REDIS_SETUP: "the region's Redis has a setting geoquota cannot run safely with",
} as const;

export type RedisStoreErrorCode = keyof typeof RedisStoreErrors;

export class RedisStoreError extends StoreMisuseError {
  declare readonly code: RedisStoreErrorCode;
  constructor(code: RedisStoreErrorCode, detail: string) {
    super(code, `${code}: ${RedisStoreErrors[code]}: ${detail}`);
    this.name = "RedisStoreError";
  }
}
