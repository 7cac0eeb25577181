// The TypeScript bindings cannot drift from the lua/*.lua headers.
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  assertSpecMatchesHeader,
  luaFiles,
  luaSource,
  parseHeader,
  RedisStoreErrors,
  SCRIPTS,
  scriptSources,
} from "../src/index.js";

describe("script headers", () => {
  it("every binding matches its script's KEYS / ARGV header", () => {
    for (const [name, spec] of Object.entries(SCRIPTS)) {
      expect(() => assertSpecMatchesHeader(name, spec, luaSource(spec.file))).not.toThrow();
    }
  });

  it("every script in lua/ has a binding; every library file in lua/lib/ is assembled", () => {
    const { dir, files, lib } = luaFiles();
    const bound = new Set(Object.values(SCRIPTS).map((s) => s.file));
    expect(files.filter((f) => !bound.has(f))).toEqual([]);
    const onDisk = readdirSync(new URL("lib/", dir)).filter((f) => f.endsWith(".lua"));
    expect([...lib].sort()).toEqual(onDisk.map((f) => `lib/${f}`).sort());
    const check = scriptSources().get("check") ?? "";
    for (const f of lib) expect(check).toContain(luaSource(f));
  });

  it("a drifted header is caught", () => {
    const src = luaSource("check.lua").replace("2 cost", "2 cost, 3 extra");
    expect(() => assertSpecMatchesHeader("check", SCRIPTS.check, src)).toThrow(/GQ_ERR_SCRIPT_HEADER/);
    const h = parseHeader(luaSource("check_compound.lua"));
    expect(h.itemKeys).toEqual(["gq:inc", "gq:dg", "P:b", "gq:pv"]);
    expect(h.itemArgv).toEqual(["cost"]);
  });

  it("every script reads time only from Redis TIME and uses HSET, never HMSET", () => {
    const { files, lib } = luaFiles();
    for (const f of [...files, ...lib]) {
      const src = luaSource(f);
      expect(src).not.toMatch(/HMSET|os\.time|os\.clock/);
    }
  });

  it("the error catalog codes are GQ_ERR_*", () => {
    for (const code of Object.keys(RedisStoreErrors)) expect(code).toMatch(/^GQ_ERR_[A-Z_]+$/);
  });
});
