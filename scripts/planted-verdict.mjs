// How the planted-bug runner (scripts/planted.mjs) reads a failure: a planted
// bug counts as caught only when a test's assertion on the rule fails. A patch
// that makes a script error out, a module fail to load or compile, or the code
// crash is not the rule's bug (it is a crash, which any test touching the code
// would notice), so such a failure makes the row `invalid`, whatever test saw it.
// Kept apart from the runner so test/planted.test.ts can check the reading.

/** Failure texts that mean "crashed", each with the kind named in the verdict. */
const CRASHES = [
  // Redis: a script that raised (runtime or compile error), whatever wrapped it.
  [
    "Redis script error",
    /ERR Error (?:running|compiling) script|ERR user_script|@user_script|user_script:\d+/,
  ],
  // Lua runtime errors, also when a test quoted them into its own message.
  ["Lua runtime error", /attempt to (?:compare|perform arithmetic|index|call|concatenate|get length)\b/],
  ["Lua runtime error", /bad argument #\d+ to '/],
  // JavaScript crashes: these are never what a rule's assertion throws.
  ["JavaScript error", /\b(?:TypeError|ReferenceError|SyntaxError)\b/],
  // vitest could not load or transform a file.
  ["collection error", /Failed to load url|Transform failed|Failed to parse source|Cannot find module/],
];

/**
 * Why a failure message is a crash rather than an assertion on the rule
 * (e.g. "Redis script error: ... attempt to compare nil with number"), or
 * undefined for an assertion failure.
 * @param {string} message the whole failure text (stack and quoted causes included)
 * @returns {string | undefined}
 */
export function crashOf(message) {
  for (const [kind, re] of CRASHES) {
    const m = re.exec(message);
    if (m === null) continue;
    // The line that matched, so the verdict shows what crashed.
    const start = message.lastIndexOf("\n", m.index) + 1;
    const end = message.indexOf("\n", m.index);
    const line = message.slice(start, end === -1 ? undefined : end).trim();
    return `${kind}: ${line}`;
  }
  return undefined;
}

/**
 * The failures of one vitest JSON report (`--reporter=json`), each with the
 * crash it is, if any. A file that failed with no test in it failed to
 * collect (an import, syntax or transform error): a crash whatever its text;
 * one that failed with no failed test failed in a hook: a crash unless the
 * hook's own assertion failed.
 * @param {{testResults: {name?: string, status: string, message?: string,
 *   assertionResults: {status: string, fullName: string, failureMessages?: string[]}[]}[]}} report
 * @param {string} file the test file, for the messages
 * @returns {{test: string, crash: string | undefined}[]}
 */
export function failuresOf(report, file) {
  const out = [];
  for (const f of report.testResults) {
    for (const a of f.assertionResults) {
      if (a.status !== "failed") continue;
      const message = (a.failureMessages ?? []).join("\n");
      out.push({ test: `${file} > ${a.fullName}: ${message.split("\n")[0]}`, crash: crashOf(message) });
    }
    if (f.status === "failed" && f.assertionResults.every((a) => a.status !== "failed")) {
      const message = String(f.message ?? "");
      // Failed outside every test: no test collected (an import, syntax or transform
      // error), or a hook that threw. Only a hook's own assertion counts; a hook that
      // timed out (a slow start) or threw anything else says nothing about the rule.
      const crash =
        crashOf(message) ??
        (f.assertionResults.length === 0
          ? `collection error: ${message.split("\n")[0]}`
          : /AssertionError/.test(message)
            ? undefined
            : `failed outside any test (a hook): ${message.split("\n")[0] || "(no message)"}`);
      out.push({ test: `${file}: ${message.split("\n")[0]}`, crash });
    }
  }
  return out;
}

/**
 * The row's verdict from the failures of its first failing test entry:
 * `invalid` when any of them is a crash (the patch does not plant the rule's
 * bug, or not only it), `caught` otherwise; the detail names the failure.
 * @param {{test: string, crash: string | undefined}[]} failures (non-empty)
 * @returns {{verdict: "caught" | "invalid", detail: string}}
 */
export function verdictOf(failures) {
  const crashed = failures.find((f) => f.crash !== undefined);
  if (crashed !== undefined) return { verdict: "invalid", detail: `${crashed.crash} (in ${crashed.test})` };
  const first = failures[0];
  if (first === undefined) throw new Error("verdictOf needs at least one failure");
  return { verdict: "caught", detail: first.test };
}

/**
 * tsc diagnostics ("file(line,col): error TSnnnn: text") as keys without the
 * position, so a patch that moves lines does not make old errors look new.
 * @param {string} output tsc's output
 * @returns {string[]}
 */
export function typeErrorsOf(output) {
  const keys = [];
  for (const line of output.split("\n")) {
    const m = /^(.+?)\(\d+,\d+\): error (TS\d+: .*)$/.exec(line.trim());
    if (m !== null) keys.push(`${m[1]}: ${m[2]}`);
  }
  return keys;
}

/**
 * The diagnostics of `after` not in `before` (as multisets): the type errors
 * a patch introduced.
 * @param {string[]} before
 * @param {string[]} after
 * @returns {string[]}
 */
export function newTypeErrors(before, after) {
  const left = new Map();
  for (const k of before) left.set(k, (left.get(k) ?? 0) + 1);
  const added = [];
  for (const k of after) {
    const n = left.get(k) ?? 0;
    if (n > 0) left.set(k, n - 1);
    else added.push(k);
  }
  return added;
}
