#!/usr/bin/env node
// Runs the planted-bug table (test/planted/planted.json): for each row, a copy
// of the repository with that row's patch applied runs exactly that row's
// tests, which must fail on an assertion. Prints caught / invalid / MISSED /
// STALE / ERROR per row and exits 1 unless every row is caught: `invalid` when
// the patch makes the code crash, fail to type-check or fail to load instead
// of breaking the rule (scripts/planted-verdict.mjs tells which), STALE when an
// original text no longer occurs exactly once (the source moved on: update the
// row). Two rows run at a time.
//
//   node scripts/planted.mjs [--jobs N] [--table FILE] [id ...]
// (--table: another table of the same format, e.g. to try a row against other tests)
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { failuresOf, newTypeErrors, typeErrorsOf, verdictOf } from "./planted-verdict.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
let TABLE = join(ROOT, "test/planted/planted.json");

function usage(msg) {
  process.stderr.write(
    `planted: ${msg}\nusage: node scripts/planted.mjs [--jobs N] [--table FILE] [id ...]\n`,
  );
  process.exit(2);
}

const argv = process.argv.slice(2);
let jobs = 2;
const only = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--jobs") {
    jobs = Number(argv[++i]);
    if (!Number.isInteger(jobs) || jobs < 1 || jobs > 2)
      usage("--jobs must be 1 or 2 (the machine is shared)");
  } else if (a === "--table") {
    const f = argv[++i];
    if (f === undefined || !existsSync(f)) usage(`--table needs an existing file (got ${f})`);
    TABLE = resolve(f);
  } else if (a.startsWith("-")) usage(`unknown flag ${a}`);
  else only.push(a);
}

/** @returns {{id: string, rule: string, patch: {file: string, original: string, replacement: string}[], tests: {project: string, file: string, name?: string}[]}[]} */
function loadTable() {
  const t = JSON.parse(readFileSync(TABLE, "utf8"));
  if (!Array.isArray(t.rows)) throw new Error(`${TABLE}: no "rows" array`);
  return t.rows;
}

/** Where the row's patches apply (exactly once each), or why not. */
function applyPatch(dir, row) {
  const texts = new Map();
  for (const p of row.patch) {
    const path = join(dir, p.file);
    if (!existsSync(path)) return `${p.file} does not exist`;
    const text = texts.get(path) ?? readFileSync(path, "utf8");
    const n = text.split(p.original).length - 1;
    if (n !== 1)
      return `${p.file}: original text found ${n} times (expected once): ${JSON.stringify(p.original)}`;
    texts.set(
      path,
      text.replace(p.original, () => p.replacement),
    );
  }
  for (const [path, text] of texts) writeFileSync(path, text);
  return undefined;
}

/** A copy of the work tree (tracked and new files), sharing the installed packages. */
function copyRepo() {
  const dir = mkdtempSync(join(tmpdir(), "gq-planted-"));
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    encoding: "utf8",
  })
    .split("\0")
    .filter((f) => f !== "" && existsSync(join(ROOT, f)));
  for (const f of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(join(ROOT, f), join(dir, f), { verbatimSymlinks: true });
  }
  // The git-ignored .bin/ (Toxiproxy, pinned pnpm, the RLS client, the libc redis-server): linked,
  // so findBinary finds it in the copy.
  if (existsSync(join(ROOT, ".bin"))) symlinkSync(join(ROOT, ".bin"), join(dir, ".bin"));
  // Root node_modules: third-party entries linked to the original; the
  // workspace links (@geoquota/*, relative) copied so they resolve to the copy.
  const nm = join(ROOT, "node_modules");
  mkdirSync(join(dir, "node_modules"));
  for (const e of readdirSync(nm)) {
    if (e === ".vite" || e === ".vite-temp") continue;
    if (e === "@geoquota")
      cpSync(join(nm, e), join(dir, "node_modules", e), { recursive: true, verbatimSymlinks: true });
    else symlinkSync(join(nm, e), join(dir, "node_modules", e));
  }
  // Per-package node_modules hold only relative symlinks: copied as they are.
  for (const p of readdirSync(join(ROOT, "packages"))) {
    const src = join(ROOT, "packages", p, "node_modules");
    if (existsSync(src) && lstatSync(src).isDirectory()) {
      cpSync(src, join(dir, "packages", p, "node_modules"), { recursive: true, verbatimSymlinks: true });
    }
  }
  return dir;
}

function run(cmd, args, cwd) {
  return new Promise((done) => {
    const child = spawn(cmd, args, {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CI: "1" },
    });
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      out += d;
    });
    child.on("close", (code) => done({ code, out }));
  });
}

/** Runs one test entry in `dir`; returns its failures ([] when all passed), each with its crash if any. */
async function runTests(dir, t) {
  const report = join(dir, `.planted-${t.project}.json`);
  const args = ["run", "--project", t.project, t.file, "--reporter=json", `--outputFile=${report}`];
  if (t.name !== undefined) args.push("-t", t.name);
  const r = await run(join(dir, "node_modules/.bin/vitest"), args, dir);
  if (!existsSync(report))
    return { error: `vitest wrote no report (exit ${r.code}):\n${r.out.slice(-2000)}` };
  const j = JSON.parse(readFileSync(report, "utf8"));
  if (j.numTotalTests === 0) return { error: `no test matched ${t.file}${t.name ? ` -t ${t.name}` : ""}` };
  const failed = failuresOf(j, t.file);
  // `-t` is a regular expression: a name with `+` or `(` in it may match nothing, and every test
  // is then skipped — which passes. Reported with the row (a MISSED row whose test never ran).
  const ran = j.numPassedTests + j.numFailedTests;
  // An unhandled error (an async crash outside any test) fails the run but no test.
  if (failed.length === 0 && r.code !== 0 && /Unhandled (?:Error|Rejection)/.test(r.out)) {
    const at = r.out.search(/Unhandled (?:Error|Rejection)/);
    failed.push({
      test: t.file,
      crash: `unhandled error: ${r.out.slice(at, at + 300).replace(/\s+/g, " ")}`,
    });
  }
  return { failed, ran };
}

/**
 * Where tsc keeps the program's incremental state: the unpatched tree's check
 * writes it, and each copy starts from it, so a row's check re-reads only the
 * patched file and what depends on it (about 5 s against 20 s for the whole
 * program here). The diagnostics are the whole program's all the same: tsc
 * keeps every unchanged file's diagnostics in this file and reports them.
 */
const BUILD_INFO = ".tmp/planted-tsc.tsbuildinfo";

/** `file: TSnnnn: text` for every tsc diagnostic in `dir` (the whole program, as `npm test` checks it). */
async function typeErrors(dir) {
  const args = ["-p", "tsconfig.json", "--noEmit", "--incremental", "--tsBuildInfoFile", BUILD_INFO];
  const r = await run(join(dir, "node_modules/.bin/tsc"), args, dir);
  return typeErrorsOf(r.out);
}

/** The diagnostics of the unpatched tree (which need not be clean mid-edit), computed once. */
let baseTypeErrors;
/**
 * An unpatched copy, made once, whose check writes the incremental state the rows
 * start from: tsc records paths relative to that file, and a copy's third-party
 * packages are links into this checkout, so only a copy beside the rows' copies
 * names them as the rows' copies do (from the checkout itself, every file looks new).
 */
let baseDir;
function baseCopy() {
  baseDir ??= copyRepo();
  return baseDir;
}

async function runRow(row) {
  const started = Date.now();
  const dir = copyRepo();
  try {
    const stale = applyPatch(dir, row);
    if (stale !== undefined) return { row, verdict: "STALE", detail: stale, ms: Date.now() - started };
    // A TypeScript patch that does not type-check would fail `npm test` before any test ran.
    if (row.patch.some((p) => p.file.endsWith(".ts"))) {
      baseTypeErrors ??= typeErrors(baseCopy());
      await baseTypeErrors;
      mkdirSync(join(dir, ".tmp"), { recursive: true });
      cpSync(join(baseCopy(), BUILD_INFO), join(dir, BUILD_INFO));
      const added = newTypeErrors(await baseTypeErrors, await typeErrors(dir));
      if (added.length > 0)
        return { row, verdict: "invalid", detail: `type error: ${added[0]}`, ms: Date.now() - started };
    }
    const unrun = [];
    for (const t of row.tests) {
      const r = await runTests(dir, t);
      if (r.error !== undefined) return { row, verdict: "ERROR", detail: r.error, ms: Date.now() - started };
      if (r.failed.length > 0) return { row, ...verdictOf(r.failed), ms: Date.now() - started };
      if (r.ran === 0)
        unrun.push(`${t.file} -t ${t.name}: no test ran (the name, a regular expression, matched none)`);
    }
    if (unrun.length > 0)
      return { row, verdict: "ERROR", detail: unrun.join("; "), ms: Date.now() - started };
    return {
      row,
      verdict: "MISSED",
      detail: row.tests.map((t) => `${t.project}:${t.file}${t.name ? ` -t ${t.name}` : ""}`).join(", "),
      ms: Date.now() - started,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows = loadTable().filter((r) => only.length === 0 || only.includes(r.id));
for (const id of only) if (!rows.some((r) => r.id === id)) usage(`no row ${id} in ${TABLE}`);
const started = Date.now();
const results = [];
let next = 0;
async function worker() {
  while (next < rows.length) {
    const row = rows[next++];
    const r = await runRow(row);
    results.push(r);
    process.stdout.write(
      `${r.verdict.padEnd(7)} ${row.id.padEnd(30)} ${(r.ms / 1000).toFixed(1).padStart(5)}s  ${r.detail.slice(0, 240)}\n`,
    );
  }
}
process.stdout.write(`planted bugs: ${rows.length} rows, ${jobs} at a time\n`);
await Promise.all(Array.from({ length: Math.min(jobs, rows.length) }, worker));
if (baseDir !== undefined) rmSync(baseDir, { recursive: true, force: true });
const bad = results.filter((r) => r.verdict !== "caught");
process.stdout.write(
  `\nplanted: ${results.length - bad.length}/${results.length} caught in ${((Date.now() - started) / 1000).toFixed(0)} s` +
    (bad.length > 0 ? `; not caught: ${bad.map((r) => `${r.row.id} (${r.verdict})`).join(", ")}` : "") +
    "\n",
);
process.exit(bad.length > 0 ? 1 : 0);
