import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ERRORS } from "../src/errors.js";
import { RedisStoreErrors } from "@geoquota/redis";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

describe("error catalog", () => {
  it("every code is documented in README.md with its status, and nothing else is", () => {
    const documented = new Map<string, number>();
    for (const m of readme.matchAll(/^\|\s*`(GQ_ERR_[A-Z_]+)`\s*\|\s*(\d{3})\s*\|/gm))
      documented.set(m[1]!, Number(m[2]));
    const catalog = new Map(Object.entries(ERRORS).map(([code, e]) => [code, e.statusCode as number]));
    expect(documented).toEqual(catalog);
  });

  it("the Redis store's codes are documented too, and the two catalogs do not overlap", () => {
    const storeRows = new Set(
      [...readme.matchAll(/^\|\s*`(GQ_ERR_[A-Z_]+)`\s*\|\s*[^\d\s|]/gm)].map((m) => m[1]),
    );
    expect(storeRows).toEqual(new Set(Object.keys(RedisStoreErrors)));
    for (const code of Object.keys(RedisStoreErrors)) expect(Object.keys(ERRORS)).not.toContain(code);
  });

  it("codes are stable identifiers", () => {
    for (const code of Object.keys(ERRORS)) expect(code).toMatch(/^GQ_ERR_[A-Z_]+$/);
  });
});
