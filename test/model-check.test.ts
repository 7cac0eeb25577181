// The Spin model of the lease protocol (model/geoquota.pml, model/README.md)
// is checked here: the safe model exhaustively (COLLAPSE) in every slice of
// model/slices.json "test" — 2 and 3 regions, the fine time grain — each to
// "Full statespace search" with errors: 0 and no truncated search (states,
// depth and time printed), and every planted variant of model/plants.json
// must produce a counterexample trail (its length printed); a plant with
// safeAt must give none, exhaustively, in those builds (it needs a third
// region, or ticks finer than ε). Needs
// `spin` and `gcc` (scripts/bootstrap.sh installs them). The larger runs
// (slices.json "full") are `npm run model:full` (scripts/model-full.mjs).
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = new URL("../", import.meta.url).pathname;
const MODEL = join(ROOT, "model");
const JOBS = Math.max(1, Math.min(2, cpus().length));

type Env = Record<string, number>;
interface Plant {
  name: string;
  plant: number;
  rule: string;
  n?: 2 | 3;
  defs?: string[];
  /** builds where the same plant must give no trail (it needs 3 regions or the fine grain) */
  safeAt?: { n: 2 | 3; defs: string[] }[];
  env: Env;
  planted: string[];
}
const plants = (JSON.parse(readFileSync(join(MODEL, "plants.json"), "utf8")) as { plants: Plant[] }).plants;

/** An exhaustive slice of the safe model (model/slices.json, model/README.md "Runs"). */
interface Slice {
  name: string;
  covers: string;
  n: 2 | 3;
  defs?: string[];
  env: Env;
  pan?: string[];
}
const slices = (JSON.parse(readFileSync(join(MODEL, "slices.json"), "utf8")) as { test: Slice[] }).test;
const DEFAULT_PAN = ["-m3000000", "-w24"];
/** One verifier per region count and compile-time defines. */
const binName = (n: number, defs: string[] = []): string =>
  `n${n}${defs.map((d) => d.replace(/\W+/g, "_")).join("")}`;
/** A slice's name within the set: regions, defines, features (the fine-grain slices reuse names). */
const sliceKey = (s: Slice): string => `${binName(s.n, s.defs)}-${s.name.replace(/\W+/g, "-")}`;

interface PanResult {
  out: string;
  code: number | null;
  seconds: number;
  dir: string;
}

function run(cmd: string, args: string[], cwd: string, env: Env = {}): Promise<PanResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const strEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
    const child = spawn(cmd, args, {
      cwd,
      env: { ...process.env, ...strEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
    });
    child.stderr.on("data", (b: Buffer) => {
      out += b.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ out, code, seconds: (Date.now() - started) / 1000, dir: cwd }));
  });
}

/** Runs the tasks at most `jobs` at a time. */
async function pool<T>(tasks: (() => Promise<T>)[], jobs: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      const task = tasks[i];
      if (task) results[i] = await task();
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
  return results;
}

function num(out: string, re: RegExp): number {
  const m = re.exec(out);
  return m ? Number(m[1]) : Number.NaN;
}

const work = join(ROOT, ".tmp", `model-check-${process.pid}`);
const bin: Record<string, string> = {};
const safe = new Map<string, PanResult>();
const plantRuns = new Map<string, PanResult>();
const plantSafe = new Map<string, PanResult>();
const safeAtKey = (p: Plant, b: { n: number; defs: string[] }): string => `${p.name}@${binName(b.n, b.defs)}`;

async function compile(name: string, defines: string[], cflags: string[]): Promise<void> {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(MODEL, "geoquota.pml"), join(dir, "geoquota.pml"));
  const a = await run("spin", ["-a", ...defines, "geoquota.pml"], dir);
  if (a.code !== 0) throw new Error(`spin -a ${defines.join(" ")} failed:\n${a.out}`);
  // -O1: the best compile + run total on a loaded 2-core machine (-O2 compiles 4x longer)
  const c = await run("gcc", ["-O1", "-w", ...cflags, "-o", "pan", "pan.c"], dir);
  if (c.code !== 0) throw new Error(`gcc of ${name} failed:\n${c.out}`);
  bin[name] = join(dir, "pan");
}

/** A pan run in its own directory (its trail file), the binary shared. */
function pan(build: string, runDir: string, args: string[], env: Env): Promise<PanResult> {
  const dir = join(work, runDir);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(work, build, "geoquota.pml"), join(dir, "geoquota.pml"));
  const exe = bin[build];
  if (!exe) throw new Error(`model-check: verifier ${build} was not built`);
  return run(exe, args, dir, env);
}

beforeAll(async () => {
  for (const [tool, args] of [
    ["spin", ["-V"]],
    ["gcc", ["--version"]],
  ] as const) {
    const r = spawnSync(tool, [...args], { encoding: "utf8" });
    if (r.error || r.status !== 0) {
      throw new Error(
        `model-check: ${tool} is not installed or not on PATH (${r.error?.message ?? `exit ${r.status}`}); ` +
          "scripts/bootstrap.sh installs it (apt-get install spin gcc)",
      );
    }
  }
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const collapse = ["-DSAFETY", "-DNOFAIR", "-DNOREDUCE", "-DCOLLAPSE", "-DMEMLIM=3500"];
  const builds = new Map<string, [number, string[]]>();
  for (const r of [...slices, ...plants.map((p) => ({ n: p.n ?? 2, defs: p.defs }))]) {
    builds.set(binName(r.n, r.defs), [r.n, r.defs ?? []]);
  }
  for (const p of plants) for (const b of p.safeAt ?? []) builds.set(binName(b.n, b.defs), [b.n, b.defs]);
  await pool(
    [...builds].map(
      ([name, [n, defs]]) =>
        () =>
          compile(name, [`-DN=${n}`, ...defs], collapse),
    ),
    JOBS,
  );
  const tasks: (() => Promise<void>)[] = [];
  // the 3-region slices (the longest runs) first, so that the two workers end together
  for (const s of [...slices].sort((a, b) => b.n - a.n)) {
    tasks.push(async () => {
      safe.set(
        sliceKey(s),
        await pan(binName(s.n, s.defs), `safe-${sliceKey(s)}`, s.pan ?? DEFAULT_PAN, s.env),
      );
    });
  }
  for (const p of plants) {
    tasks.push(async () => {
      const env = { ...p.env, GQ_PLANT: p.plant };
      plantRuns.set(p.name, await pan(binName(p.n ?? 2, p.defs), `plant-${p.name}`, DEFAULT_PAN, env));
    });
    for (const b of p.safeAt ?? []) {
      tasks.push(async () => {
        const env = { ...p.env, GQ_PLANT: p.plant };
        const build = binName(b.n, b.defs);
        plantSafe.set(safeAtKey(p, b), await pan(build, `plant-${p.name}-${build}`, DEFAULT_PAN, env));
      });
    }
  }
  await pool(tasks, JOBS);
  // timeout: ~3 min of pan time per worker on an idle 2-core machine, 17 min
  // measured under a load average of 25: the margin is for a loaded machine
}, 3_600_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

function report(line: string): void {
  process.stdout.write(`model-check: ${line}\n`);
}

/** The whole state space searched, no error: pan's verdict, not just its exit status. */
function expectComplete(r: PanResult): void {
  expect(r.code, r.out).toBe(0);
  expect(r.out, "no error").toMatch(/errors: 0\b/);
  expect(r.out, "full state space").toMatch(/Full statespace search/);
  expect(r.out, "no search cut short").not.toMatch(
    /Search not completed|max search depth too small|out of memory|reached -DMEMLIM bound/,
  );
  expect(existsSync(join(r.dir, "geoquota.pml.trail")), "no trail").toBe(false);
}

describe("Spin model of the lease protocol (model/geoquota.pml)", () => {
  for (const s of slices) {
    it(`${s.n} regions${s.defs?.length ? ` ${s.defs.join(" ")}` : ""}, exhaustive, safe: ${s.name}`, () => {
      const r = safe.get(sliceKey(s));
      expect(r, "the run happened").toBeDefined();
      if (!r) return;
      const states = num(r.out, /(\d+) states, stored/);
      const depth = num(r.out, /depth reached (\d+)/);
      const defs = s.defs?.length ? ` ${s.defs.join(" ")}` : "";
      report(
        `safe ${s.n} regions${defs} ${s.name} (${s.covers}): ${states} states, depth ${depth}, ` +
          `${r.seconds.toFixed(1)} s`,
      );
      expectComplete(r);
      expect(states).toBeGreaterThan(1000);
    });
  }

  it("plants.json: one plant per rule, each mapped to planted.json where the same bug is planted", () => {
    const planted = new Set(
      (
        JSON.parse(readFileSync(join(ROOT, "test/planted/planted.json"), "utf8")) as {
          rows: { id: string }[];
        }
      ).rows.map((r) => r.id),
    );
    const model = readFileSync(join(MODEL, "geoquota.pml"), "utf8");
    const numbers = new Set<number>();
    for (const p of plants) {
      expect(model, `P_${p.name} defined`).toContain(`#define P_${p.name} `);
      const m = new RegExp(`#define P_${p.name}\\s+(\\d+)`).exec(model);
      expect(Number(m?.[1]), `P_${p.name} = plant number`).toBe(p.plant);
      expect(numbers.has(p.plant), `plant ${p.plant} once`).toBe(false);
      numbers.add(p.plant);
      for (const id of p.planted) expect(planted.has(id), `planted.json id ${id}`).toBe(true);
    }
    // every P_* of the model is in the table
    const defined = [...model.matchAll(/#define P_([A-Z_]+)\s+\d+/g)].map((m) => m[1]);
    expect(defined.sort()).toEqual(plants.map((p) => p.name).sort());
  });

  for (const p of plants) {
    it(`planted ${p.name} (${p.rule}) produces a counterexample`, () => {
      const r = plantRuns.get(p.name);
      expect(r, "the run happened").toBeDefined();
      if (!r) return;
      const trail = join(r.dir, "geoquota.pml.trail");
      expect(r.out, `${p.name}: Spin found no error`).toMatch(/errors: 1\b/);
      expect(existsSync(trail), "trail written").toBe(true);
      const steps = readFileSync(trail, "utf8")
        .split("\n")
        .filter((l) => /^\d+:/.test(l)).length;
      const what = /pan:1: (.*?) \(at depth/.exec(r.out)?.[1] ?? "?";
      report(
        `plant ${p.name} (${p.n ?? 2} regions${p.defs?.length ? ` ${p.defs.join(" ")}` : ""}): ${what}, ` +
          `trail of ${steps} steps, ${r.seconds.toFixed(1)} s`,
      );
      expect(steps).toBeGreaterThan(0);
      // a violation of a property, never a model error (a stuck model or an out-of-range record)
      expect(what).toMatch(/assertion violated \((gv>=0|hsum<=4|hpin<=|htk<=sh\[hi\])/);
    });
    for (const b of p.safeAt ?? []) {
      const at = `${b.n} regions${b.defs.length ? ` ${b.defs.join(" ")}` : ", eps = 1 tick"}`;
      it(`planted ${p.name} gives no trail at ${at} (exhaustive): it needs its own build`, () => {
        const r = plantSafe.get(safeAtKey(p, b));
        expect(r, "the run happened").toBeDefined();
        if (!r) return;
        const states = num(r.out, /(\d+) states, stored/);
        const depth = num(r.out, /depth reached (\d+)/);
        report(
          `plant ${p.name} at ${at}: no error, ${states} states, depth ${depth}, ${r.seconds.toFixed(1)} s`,
        );
        expectComplete(r);
      });
    }
  }
});
