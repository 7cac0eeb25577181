// Loads lua/*.lua (each with the library, lua/lib/*.lua, inserted) into an
// ioredis client via `defineCommand`: EVALSHA, with ioredis' fallback to EVAL
// on NOSCRIPT (so a SCRIPT FLUSH or a restarted server is harmless). Never
// used inside MULTI, where ioredis cannot fall back.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { RedisStoreError } from "./errors.js";
import { parseHeader } from "./header.js";
import type { RedisClient } from "./keys.js";
import { unpackDoubles } from "./packed.js";
import { DECODERS, type ScriptReplies } from "./replies.js";
import type { ScriptArgs, TypedScriptName } from "./script-args.js";
import { SCRIPTS, type ScriptName, type ScriptSpec } from "./specs.js";

/**
 * Where the Lua lives (the one module that knows): in a checkout of the
 * repository, the top-level lua/ (their source, so an edit takes effect
 * without a build); in an installed package, the copy that the build puts in
 * the package's own lua/ (packages/redis/lua, shipped in the tarball). The
 * paths are the same from src/ and dist/.
 */
const LUA_DIR = ((): URL => {
  const repo = new URL("../../../lua/", import.meta.url);
  const inRepo = existsSync(new URL("lib/core.lua", repo)) && existsSync(new URL("../packages/redis/", repo));
  return inRepo ? repo : new URL("../lua/", import.meta.url);
})();

/**
 * The library (shared local functions), split by concern under lua/lib/ and
 * concatenated in this order into one text, as if it were one file: Lua needs
 * a local function defined before a later one refers to it, so each file uses
 * only what the files before it define. core: numbers and formatting, policy,
 * incarnation marker, recovery; keep: change feed, TTLs, counters, keep();
 * book: loan records (P:l) and lease records (P:k); schedule: share s(t),
 * pins, sx; refunds: what a refund may give back (headroom minima);
 * bucket: refill (settle), load/store, lease release; windows:
 * window decisions and refunds.
 */
const LIB_FILES: readonly string[] = [
  "lib/core.lua",
  "lib/keep.lua",
  "lib/book.lua",
  "lib/schedule.lua",
  "lib/refunds.lua",
  "lib/bucket.lua",
  "lib/windows.lua",
];

/** The library's text: LIB_FILES in order, one chunk. */
function libSource(): string {
  return LIB_FILES.map((f) => luaSource(f)).join("\n");
}

/**
 * The Lua scripts' directory and file names (tests and tools list them from
 * here): the scripts (lua/*.lua) and the library files (LIB_FILES).
 */
export function luaFiles(): {
  readonly dir: URL;
  readonly files: readonly string[];
  readonly lib: readonly string[];
} {
  return { dir: LUA_DIR, files: readdirSync(LUA_DIR).filter((f) => f.endsWith(".lua")), lib: LIB_FILES };
}

export function luaSource(file: string): string {
  return readFileSync(new URL(file, LUA_DIR), "utf8");
}

/** Throws GQ_ERR_SCRIPT_HEADER when a script's header and its binding disagree. */
export function assertSpecMatchesHeader(name: string, spec: ScriptSpec, source: string): void {
  const h = parseHeader(source);
  const same = (a: readonly string[], b: readonly string[]) =>
    a.length === b.length && a.every((x, i) => x === b[i]);
  const problems: string[] = [];
  if (!same(h.keys, spec.keys)) problems.push(`KEYS ${h.keys.join(",")} ≠ ${spec.keys.join(",")}`);
  if (!same(h.argv, spec.argv)) problems.push(`ARGV ${h.argv.join(",")} ≠ ${spec.argv.join(",")}`);
  if (!same(h.itemKeys, spec.itemKeys ?? [])) problems.push(`item KEYS ${h.itemKeys.join(",")}`);
  if (!same(h.itemArgv, spec.itemArgv ?? [])) problems.push(`item ARGV ${h.itemArgv.join(",")}`);
  if (h.returns === "") problems.push("no Returns line");
  if (problems.length > 0)
    throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name}: ${problems.join("; ")}`);
}

/** The line a script may contain to place the library there instead of after its first line. */
export const LIB_MARKER = "-- @lib";

/**
 * Library + script. The library goes where the script has a `-- @lib` line,
 * so a fast path above it runs without instantiating the library (Redis runs
 * the whole chunk per call: every `local function` of the library is a closure
 * built on every call, measurable on the hot path). Otherwise it goes after the
 * script's first line, so SCRIPT/SLOWLOG output still names the script.
 */
export function assemble(body: string, lib: string): string {
  const lines = body.split("\n");
  const at = lines.indexOf(LIB_MARKER);
  if (at >= 0) return [...lines.slice(0, at), lib, ...lines.slice(at + 1)].join("\n");
  return `${body.slice(0, body.indexOf("\n"))}\n${lib}\n${body}`;
}

/**
 * The line of lua/check_batch.lua where check.lua (assembled, library inside) becomes the body of
 * its per-item function: the batch decides each item with check.lua's own text, never a copy.
 */
export const CHECK_MARKER = "-- @check";

/** check_batch.lua: check.lua (with its library) placed at its `-- @check` line; no library of its own. */
export function assembleBatch(body: string, check: string): string {
  const lines = body.split("\n");
  const at = lines.indexOf(CHECK_MARKER);
  if (at < 0) throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `no ${CHECK_MARKER} line`);
  return [...lines.slice(0, at), check, ...lines.slice(at + 1)].join("\n");
}

let cachedSources: Map<ScriptName, string> | undefined;

/** Script texts as sent to Redis (library + script), validated once per process. */
export function scriptSources(): Map<ScriptName, string> {
  if (cachedSources) return cachedSources;
  const lib = libSource();
  const out = new Map<ScriptName, string>();
  for (const [name, spec] of Object.entries(SCRIPTS) as [ScriptName, ScriptSpec][]) {
    const body = luaSource(spec.file);
    assertSpecMatchesHeader(name, spec, body);
    out.set(
      name,
      body.split("\n").includes(CHECK_MARKER)
        ? assembleBatch(body, assemble(luaSource(SCRIPTS.check.file), lib))
        : assemble(body, lib),
    );
  }
  cachedSources = out;
  return out;
}

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

const COMMAND_PREFIX = "gq_";

/**
 * The command of a script on `redis`: ioredis' `…Buffer` variant for a packed reply (a string of
 * packed doubles must not be decoded as UTF-8).
 */
function commandOf(redis: RedisClient, name: ScriptName): ScriptFn | undefined {
  const spec: ScriptSpec = SCRIPTS[name];
  const cmd = COMMAND_PREFIX + name + (spec.packedReply ? "Buffer" : "");
  return (redis as unknown as Record<string, ScriptFn>)[cmd];
}

/** A script's reply → its interface (replies.ts); a reply of another shape is GQ_ERR_SCRIPT_REPLY. */
function decodeReply<N extends ScriptName>(name: N, reply: unknown): ScriptReplies[N] {
  const spec: ScriptSpec = SCRIPTS[name];
  if (spec.packedReply && Buffer.isBuffer(reply)) return DECODERS[name](unpackDoubles(reply));
  if (!spec.packedReply && Array.isArray(reply)) return DECODERS[name](reply);
  throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `${name}: ${String(reply)}`);
}

/** Defines every script on `redis` (idempotent) and returns a caller checking arities. */
export function bindScripts(redis: RedisClient): ScriptCaller {
  const target = redis as unknown as Record<string, unknown>;
  for (const [name, lua] of scriptSources()) {
    const cmd = COMMAND_PREFIX + name;
    if (typeof target[cmd] === "function") continue;
    const spec: ScriptSpec = SCRIPTS[name];
    const fixed = spec.itemKeys === undefined ? { numberOfKeys: spec.keys.length } : {};
    redis.defineCommand(cmd, { lua, ...fixed });
  }
  return new ScriptCaller(redis);
}

/**
 * A script call whose KEYS and leading ARGV (`head`) were checked against the spec once:
 * each call appends the `tail` arguments and decodes the reply (the per-key hot path:
 * no per-call arity check, no argument arrays joined per call).
 */
export type PreparedCall<N extends ScriptName> = (
  head: readonly (string | number)[],
  ...tail: (string | number)[]
) => Promise<ScriptReplies[N]>;

export class ScriptCaller {
  constructor(private readonly redis: RedisClient) {}

  /**
   * A caller for a fixed-arity script (no items, no variadic ARGV) taking `tailArgs`
   * trailing arguments; `checkHead` validates a head once (throws GQ_ERR_SCRIPT_HEADER).
   */
  prepare<N extends ScriptName>(
    name: N,
    tailArgs: number,
  ): { call: PreparedCall<N>; checkHead: (keys: number, argv: number) => void } {
    const spec: ScriptSpec = SCRIPTS[name];
    const fn = commandOf(this.redis, name);
    if (fn === undefined || spec.itemKeys !== undefined || "variadicArgv" in spec) {
      throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name}: not a fixed-arity script`);
    }
    const redis = this.redis;
    return {
      checkHead: (keys, argv) => {
        if (keys !== spec.keys.length || argv + tailArgs !== spec.argv.length) {
          throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name}: ${keys} keys, ${argv + tailArgs} args`);
        }
      },
      call: async (head, ...tail) => {
        if (tail.length !== tailArgs) {
          throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name}: ${tail.length} trailing args`);
        }
        return decodeReply(name, await fn.call(redis, ...head, ...tail));
      },
    };
  }

  /**
   * A caller for an item script (check_batch) whose whole command, `numkeys` first, the caller
   * builds in one array (the micro-batch's: no spread, no per-call arity check; batch.ts builds
   * it from heads checked once).
   */
  prepareItems<N extends ScriptName>(
    name: N,
  ): (command: readonly (string | number)[]) => Promise<ScriptReplies[N]> {
    const spec: ScriptSpec = SCRIPTS[name];
    const fn = commandOf(this.redis, name);
    if (fn === undefined || spec.itemKeys === undefined) {
      throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name}: not an item script`);
    }
    const redis = this.redis;
    return async (command) => decodeReply(name, await fn.apply(redis, command as (string | number)[]));
  }

  /** Runs a script with arguments from its typed builder (script-args.ts): the source's way in. */
  run<N extends TypedScriptName>(name: N, args: ScriptArgs[N]): Promise<ScriptReplies[N]> {
    return this.call(name, args.keys, args.argv);
  }

  /**
   * Runs a script from raw arrays (tests that feed a script raw input; `run` is the typed
   * form); `keys` and `argv` must match its spec (the header) in length. The reply comes back decoded into the script's interface
   * (replies.ts).
   */
  async call<N extends ScriptName>(
    name: N,
    keys: readonly string[],
    argv: readonly (string | number)[],
  ): Promise<ScriptReplies[N]> {
    const spec: ScriptSpec = SCRIPTS[name];
    const fn = commandOf(this.redis, name);
    if (fn === undefined) throw new RedisStoreError("GQ_ERR_SCRIPT_HEADER", `${name} not defined`);
    let reply: unknown;
    if (spec.itemKeys !== undefined) {
      const items = (keys.length - spec.keys.length) / spec.itemKeys.length;
      const itemArgv = spec.itemArgv?.length ?? 0;
      const plain = spec.argv.length + items * itemArgv;
      const tailed = spec.itemTail !== undefined && argv.length === plain + items;
      if (!Number.isInteger(items) || (argv.length !== plain && !tailed)) {
        throw new RedisStoreError(
          "GQ_ERR_SCRIPT_HEADER",
          `${name}: ${keys.length} keys, ${argv.length} args`,
        );
      }
      reply = await fn.call(this.redis, keys.length, ...keys, ...argv);
    } else {
      const argOk = spec.variadicArgv ? argv.length >= spec.argv.length : argv.length === spec.argv.length;
      if (keys.length !== spec.keys.length || !argOk) {
        throw new RedisStoreError(
          "GQ_ERR_SCRIPT_HEADER",
          `${name}: ${keys.length} keys, ${argv.length} args`,
        );
      }
      reply = await fn.call(this.redis, ...keys, ...argv);
    }
    return decodeReply(name, reply);
  }
}
