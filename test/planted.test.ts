// The planted-bug table is well-formed: every row names a rule, its patch's
// original text occurs exactly once in today's source (a stale row is an
// error, not a skip), the replacement changes something, and every test file
// it names exists in the named vitest project. Whether each row is caught is
// what `npm run planted` (scripts/planted.mjs) checks.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../", import.meta.url);
const table = JSON.parse(readFileSync(new URL("test/planted/planted.json", ROOT), "utf8")) as {
  rows: {
    id: string;
    rule: string;
    patch: { file: string; original: string; replacement: string }[];
    tests: { project: string; file: string; name?: string }[];
  }[];
};
const projects = new Map<string, URL>([
  ...readdirSync(new URL("packages/", ROOT)).map((p) => [p, new URL(`packages/${p}/`, ROOT)] as const),
  ["integration", new URL("test/", ROOT)],
]);

describe("planted-bug table (test/planted/planted.json)", () => {
  it("has rows with unique ids", () => {
    expect(table.rows.length).toBeGreaterThan(0);
    const ids = table.rows.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9][a-z0-9-]*$/);
  });

  for (const row of table.rows) {
    it(row.id, () => {
      expect(row.rule.length, "rule").toBeGreaterThan(0);
      expect(row.patch.length, "patch").toBeGreaterThan(0);
      expect(row.tests.length, "tests").toBeGreaterThan(0);
      for (const p of row.patch) {
        const path = new URL(p.file, ROOT);
        expect(existsSync(path), `${p.file} exists`).toBe(true);
        const text = readFileSync(path, "utf8");
        expect(
          text.split(p.original).length - 1,
          `occurrences in ${p.file} of ${JSON.stringify(p.original)}`,
        ).toBe(1);
        expect(p.replacement, "the replacement changes the text").not.toBe(p.original);
      }
      for (const t of row.tests) {
        const root = projects.get(t.project);
        expect(root, `vitest project ${t.project}`).toBeDefined();
        expect(existsSync(new URL(t.file, root)), `${t.project}/${t.file} exists`).toBe(true);
        expect(t.file).toMatch(/\.test\.ts$/);
      }
    });
  }
});
