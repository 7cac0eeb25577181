// The TypeScript side of each script's contract. A header parser compares
// these lists with the `-- KEYS:` / `-- ARGV:` blocks of lua/*.lua at load
// time and in a test, so the bindings cannot drift from the scripts.

/**
 * Per-key scripts: the 4 keys they all share (lua/lib/core.lua). `gq:inc`, `gq:dg`, `gq:pv` name
 * the tenant's shard keys (`gq:{s<k>}:inc`, `gq:{s<k>}:dg`, `gq:{s<k>}:pv:<version>`, keys.ts):
 * all KEYS of one call share one hash tag; the scripts name the key's other keys from P:b.
 */
export const KEY_SCRIPT_KEYS = ["gq:inc", "gq:dg", "P:b", "gq:pv"] as const;

export interface ScriptSpec {
  readonly file: string;
  /** Fixed KEYS, in order (names as the header writes them). */
  readonly keys: readonly string[];
  /** Fixed ARGV, in order. */
  readonly argv: readonly string[];
  /** Keys / arguments repeated per item after the fixed ones (compound check). */
  readonly itemKeys?: readonly string[];
  readonly itemArgv?: readonly string[];
  /** Optional: one more argument per item after all items (compound check: each item's need). */
  readonly itemTail?: string;
  /** Further arguments follow the fixed ones in a script-specific layout (loan_merge, lease_acquire). */
  readonly variadicArgv?: true;
  /** The reply is one string of packed doubles (packed.ts), not a table: the hot path's. */
  readonly packedReply?: true;
}

const keyScript = (file: string, extra: readonly string[]): ScriptSpec => ({
  file,
  keys: KEY_SCRIPT_KEYS,
  argv: ["region", ...extra],
});

export const SCRIPTS = {
  check: { ...keyScript("check.lua", ["cost"]), packedReply: true },
  refund: keyScript("refund.lua", ["cost", "receiptId", "admittedUs", "expiresUs"]),
  checkCompound: {
    file: "check_compound.lua",
    keys: [],
    argv: ["region", "itemCount"],
    itemKeys: KEY_SCRIPT_KEYS,
    itemArgv: ["cost"],
    itemTail: "need",
  },
  checkBatch: {
    file: "check_batch.lua",
    keys: [],
    argv: ["region", "itemCount"],
    itemKeys: KEY_SCRIPT_KEYS,
    itemArgv: ["cost"],
    packedReply: true,
  },
  leaseAcquire: {
    ...keyScript("lease_acquire.lua", ["leaseId", "tokens", "durationUs", "releaseCount"]),
    variadicArgv: true,
  },
  leaseRelease: keyScript("lease_release.lua", ["leaseId", "used"]),
  assignReserve: keyScript("assign_reserve.lua", [
    "assignmentId",
    "burst",
    "rate",
    "ttlUs",
    "marginUs",
    "supersedes",
  ]),
  assignUsage: keyScript("assign_usage.lua", ["allowed", "denied"]),
  loanGrant: keyScript("loan_grant.lua", ["borrower", "units", "durationUs"]),
  loanMerge: { ...keyScript("loan_merge.lua", ["loanCount"]), variadicArgv: true },
  loanReturn: keyScript("loan_return.lua", ["lender"]),
  loanReturnReceived: keyScript("loan_return_received.lua", ["borrower", "seq"]),
  inspect: keyScript("inspect.lua", []),
  reset: keyScript("reset.lua", []),
  drainDirty: { file: "drain_dirty.lua", keys: [], argv: ["max", "start"], itemKeys: ["gq:dirty", "gq:dg"] },
  regionInit: { file: "region_init.lua", keys: ["gq:inc", "gq:rid"], argv: ["mode", "replid", "freshId"] },
} as const satisfies Record<string, ScriptSpec>;

export type ScriptName = keyof typeof SCRIPTS;
