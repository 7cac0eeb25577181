// The planted-bug table is well-formed: every row names a rule, its patch's
// original text occurs exactly once in today's source (a stale row is an
// error, not a skip), the replacement changes something, and every test file
// it names exists in the named vitest project. Whether each row is caught is
// what `npm run planted` (scripts/planted.mjs) checks.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { crashOf, failuresOf, newTypeErrors, typeErrorsOf, verdictOf } from "../scripts/planted-verdict.mjs";

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

// The runner's reading of failures (scripts/planted-verdict.mjs): a row counts
// as caught only by an assertion; a crash, a script error, a load or type
// error makes it `invalid`. The texts are what vitest's JSON report carried.
describe("planted runner: caught vs invalid", () => {
  const assertion =
    "AssertionError: step 14 grant (after: check): expected { ok: true, units: 623000 } to deeply equal { ok: false, reason: 'floor' }\n    at test/lua-differential.int.test.ts:883:15";
  const scriptCrash =
    "Error: Lua ≠ model for token_bucket (seed 20261130); replay: …\nops: [[]]\nReplyError: ERR user_script:308: attempt to compare nil with number script: f02c9e24, on @user_script:308.";

  it("an assertion on the rule is not a crash", () => {
    expect(crashOf(assertion)).toBeUndefined();
    expect(crashOf("AssertionError: expected 101 to be less than or equal to 100.5")).toBeUndefined();
  });

  it("a Redis script error quoted inside a test's own message is a crash", () => {
    expect(crashOf(scriptCrash)).toMatch(/^Redis script error: ReplyError: ERR user_script:308: attempt/);
    expect(
      crashOf("ReplyError: ERR Error compiling script (new function): user_script:3: 'end' expected"),
    ).toMatch(/^Redis script error/);
    expect(crashOf("lua: attempt to perform arithmetic on a nil value (local 'x')")).toMatch(
      /^Lua runtime error/,
    );
    expect(crashOf("bad argument #1 to 'tonumber' (value expected)")).toMatch(/^Lua runtime error/);
  });

  it("TypeError, ReferenceError and SyntaxError are crashes, also behind an assertion's wording", () => {
    expect(crashOf("TypeError: Cannot read properties of undefined (reading 'base')")).toMatch(
      /^JavaScript error/,
    );
    expect(crashOf("ReferenceError: shareAt is not defined")).toMatch(/^JavaScript error/);
    expect(crashOf("expected TypeError: x is not a function to be an instance of GqError")).toMatch(
      /^JavaScript error/,
    );
    expect(crashOf("SyntaxError: Unexpected token ')'")).toMatch(/^JavaScript error/);
  });

  it("a file that failed with no test in it is a collection error; a failed hook counts only by its assertion", () => {
    const collected = failuresOf(
      { testResults: [{ status: "failed", message: "Error: boom while importing", assertionResults: [] }] },
      "test/x.test.ts",
    );
    expect(collected).toHaveLength(1);
    expect(collected[0]?.crash).toMatch(/^collection error: Error: boom/);
    const hook = failuresOf(
      {
        testResults: [
          {
            status: "failed",
            message: "AssertionError: expected 3 to be 2",
            assertionResults: [{ status: "passed", fullName: "t" }],
          },
        ],
      },
      "test/x.test.ts",
    );
    expect(hook[0]?.crash).toBeUndefined();
    // A hook that timed out (or threw without an assertion) fails the file with every test skipped.
    const timedOut = failuresOf(
      {
        testResults: [
          { status: "failed", message: "", assertionResults: [{ status: "skipped", fullName: "t" }] },
        ],
      },
      "test/x.test.ts",
    );
    expect(timedOut[0]?.crash).toMatch(/^failed outside any test \(a hook\): \(no message\)/);
  });

  it("one crash among the failures makes the row invalid; assertions alone make it caught", () => {
    const failures = failuresOf(
      {
        testResults: [
          {
            status: "failed",
            assertionResults: [
              { status: "failed", fullName: "a", failureMessages: [assertion] },
              { status: "passed", fullName: "b" },
              { status: "failed", fullName: "c", failureMessages: [scriptCrash] },
            ],
          },
        ],
      },
      "test/lua-differential.int.test.ts",
    );
    const v = verdictOf(failures);
    expect(v.verdict).toBe("invalid");
    expect(v.detail).toMatch(
      /attempt to compare nil with number.*\(in test\/lua-differential.int.test.ts > c:/,
    );
    expect(verdictOf(failures.slice(0, 1))).toEqual({
      verdict: "caught",
      detail: `test/lua-differential.int.test.ts > a: ${assertion.split("\n")[0]}`,
    });
  });

  it("type errors a patch adds are told from those already there, wherever the lines moved", () => {
    const before = typeErrorsOf(
      "packages/a/src/x.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n",
    );
    const after = typeErrorsOf(
      [
        "packages/a/src/x.ts(4,5): error TS2322: Type 'string' is not assignable to type 'number'.",
        "packages/b/src/y.ts(10,1): error TS2554: Expected 5 arguments, but got 4.",
        "Found 2 errors.",
      ].join("\n"),
    );
    expect(newTypeErrors(before, after)).toEqual([
      "packages/b/src/y.ts: TS2554: Expected 5 arguments, but got 4.",
    ]);
    expect(newTypeErrors(after, after)).toEqual([]);
  });
});
