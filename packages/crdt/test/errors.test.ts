// The error catalog and README.md must list the same codes (fastify-style check).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { closeCodeOf, ERRORS } from "../src/index.js";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

describe("error catalog", () => {
  it("documents every code in README.md, with its close code, and nothing else", () => {
    const documented = new Set(readme.match(/GQ_ERR_[A-Z_]+/g) ?? []);
    const catalog = Object.keys(ERRORS);
    expect([...documented].sort()).toEqual([...catalog].sort());
    for (const code of catalog) {
      const row = readme.split("\n").find((l) => l.startsWith(`| \`${code}\``));
      expect(row, `README table row for ${code}`).toBeDefined();
      expect(row).toContain(String(closeCodeOf(code as keyof typeof ERRORS)));
    }
  });

  it("codes are unique, prefixed and have summaries", () => {
    for (const [code, e] of Object.entries(ERRORS)) {
      expect(code).toMatch(/^GQ_ERR_[A-Z_]+$/);
      expect(e.summary.length).toBeGreaterThan(10);
    }
  });
});
