// The Spin model of the lease protocol (model/geoquota.pml, model/README.md)
// is checked here: the safe 2-region model exhaustively in every slice
// (errors: 0, the whole state space: state count and depth printed), the
// 3-region model in a bounded (bitstate, depth-limited) search, and every
// planted variant of model/plants.json must produce a counterexample trail
// (its length printed). Needs `spin` and `gcc` (scripts/bootstrap.sh installs
// them). GQ_MODEL_LONG=1 runs deeper checks (see model/README.md "Runs").
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = new URL("../", import.meta.url).pathname;
const MODEL = join(ROOT, "model");
const LONG = process.env.GQ_MODEL_LONG === "1";
const JOBS = Math.max(1, Math.min(2, cpus().length));

type Env = Record<string, number>;
interface Plant {
  name: string;
  plant: number;
  rule: string;
  n?: 3;
  env: Env;
  planted: string[];
}
const plants = (JSON.parse(readFileSync(join(MODEL, "plants.json"), "utf8")) as { plants: Plant[] }).plants;

/** An exhaustive slice of the safe model (model/README.md "Runs"). */
interface Slice {
  name: string;
  covers: string;
  n: 2 | 3;
  env: Env;
}
const slices: Slice[] = [
  {
    name: "loans+loss",
    covers:
      "loans (grant, renew, merge, early return, lapse) with message faults, state losses and recovery, unleased mode",
    n: 2,
    env: { GQ_LEASED: 0, GQ_LOANS: 1, GQ_LOSS: 1, GQ_POLICY: 0 },
  },
  {
    name: "loans+policy",
    covers: "loans with message faults across a policy change of the weights, unleased mode",
    n: 2,
    env: { GQ_LEASED: 0, GQ_LOANS: 1, GQ_LOSS: 0, GQ_POLICY: 1, GQ_CNEW: 1 },
  },
  {
    name: "leases+loans",
    covers: "process leases pinned to share with loans and message faults, leased mode",
    n: 2,
    env: { GQ_LEASED: 1, GQ_LOANS: 1, GQ_LOSS: 0, GQ_POLICY: 0 },
  },
  {
    name: "leases+loss",
    covers:
      "process leases across state losses and leased-mode recovery (share 0, then floor, empty buckets)",
    n: 2,
    env: { GQ_LEASED: 1, GQ_LOANS: 0, GQ_LOSS: 1, GQ_POLICY: 0, GQ_OFFS: 2 },
  },
  {
    name: "leases+loss+policy",
    covers:
      "process leases across state losses and a policy change of C (1 -> 2) and the weights, leased mode",
    n: 2,
    env: { GQ_LEASED: 1, GQ_LOANS: 0, GQ_LOSS: 1, GQ_POLICY: 1, GQ_OFFS: 2, GQ_CNEW: 2 },
  },
];
const longSlices: Slice[] = [
  {
    name: "loans+loss+policy",
    covers: "loans with message faults, state losses and a policy change of C and the weights, unleased mode",
    n: 2,
    env: { GQ_LEASED: 0, GQ_LOANS: 1, GQ_LOSS: 1, GQ_POLICY: 1, GQ_CNEW: 2 },
  },
  {
    name: "leases+loans+loss",
    covers: "process leases with loans, message faults and state losses, leased mode",
    n: 2,
    env: { GQ_LEASED: 1, GQ_LOANS: 1, GQ_LOSS: 1, GQ_POLICY: 0 },
  },
];

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
let bounded: PanResult | undefined;
const EXHAUSTIVE = LONG ? ["-m10000000", "-w26"] : ["-m3000000", "-w24"];
// 3 regions, every feature on: a bitstate search (2^19 bits, so states are
// dropped on hash collisions) cut at depth 400 steps. Not exhaustive.
const BOUNDED = {
  args: LONG ? ["-m3000", "-w27"] : ["-m400", "-w19"],
  env: { GQ_LEASED: 2, GQ_LOANS: 1, GQ_LOSS: 1, GQ_POLICY: 1 },
};

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
function pan(binName: string, runDir: string, args: string[], env: Env): Promise<PanResult> {
  const dir = join(work, runDir);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(work, binName, "geoquota.pml"), join(dir, "geoquota.pml"));
  const exe = bin[binName];
  if (!exe) throw new Error(`model-check: verifier ${binName} was not built`);
  return run(exe, args, dir, env);
}

beforeAll(
  async () => {
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
    const collapse = ["-DSAFETY", "-DNOFAIR", "-DNOREDUCE", "-DCOLLAPSE", "-DMEMLIM=3000"];
    await Promise.all([
      compile("n2", [], collapse),
      compile("n3", ["-DN=3"], ["-DSAFETY", "-DNOFAIR", "-DNOREDUCE", "-DBITSTATE"]),
    ]);
    const tasks: (() => Promise<void>)[] = [];
    for (const s of LONG ? [...slices, ...longSlices] : slices) {
      tasks.push(async () => {
        safe.set(s.name, await pan("n2", `safe-${s.name.replace(/\W+/g, "-")}`, EXHAUSTIVE, s.env));
      });
    }
    tasks.push(async () => {
      bounded = await pan("n3", "bounded", BOUNDED.args, BOUNDED.env);
    });
    for (const p of plants) {
      tasks.push(async () => {
        const [b, args] = p.n === 3 ? ["n3", ["-m3000000", "-w26"]] : ["n2", EXHAUSTIVE];
        plantRuns.set(p.name, await pan(b, `plant-${p.name}`, args, { ...p.env, GQ_PLANT: p.plant }));
      });
    }
    await pool(tasks, JOBS);
  },
  LONG ? 6 * 3_600_000 : 900_000,
);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

function report(line: string): void {
  process.stdout.write(`model-check: ${line}\n`);
}

describe("Spin model of the lease protocol (model/geoquota.pml)", () => {
  for (const s of LONG ? [...slices, ...longSlices] : slices) {
    it(`2 regions, exhaustive, safe: ${s.name}`, () => {
      const r = safe.get(s.name);
      expect(r, "the run happened").toBeDefined();
      if (!r) return;
      const states = num(r.out, /(\d+) states, stored/);
      const depth = num(r.out, /depth reached (\d+)/);
      report(`safe ${s.name} (${s.covers}): ${states} states, depth ${depth}, ${r.seconds.toFixed(1)} s`);
      expect(r.code, r.out).toBe(0);
      expect(r.out, "no error").toMatch(/errors: 0\b/);
      expect(r.out, "full state space").toMatch(/Full statespace search/);
      expect(r.out, "no search cut short").not.toMatch(
        /Search not completed|max search depth too small|out of memory/,
      );
      expect(states).toBeGreaterThan(1000);
    });
  }

  it("3 regions, bounded (bitstate, depth-limited), safe", () => {
    expect(bounded, "the run happened").toBeDefined();
    if (!bounded) return;
    const states = num(bounded.out, /(\d+) states, stored/);
    const depth = num(bounded.out, /depth reached (\d+)/);
    report(
      `3 regions BOUNDED (bitstate ${BOUNDED.args.join(" ")}, not exhaustive): ${states} states, depth ${depth}, ` +
        `${bounded.seconds.toFixed(1)} s`,
    );
    expect(bounded.code, bounded.out).toBe(0);
    expect(bounded.out, "no error").toMatch(/errors: 0\b/);
    expect(bounded.out).toMatch(/Bit statespace search/);
    expect(states).toBeGreaterThan(1000);
  });

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
        `plant ${p.name} (${p.n ?? 2} regions): ${what}, trail of ${steps} steps, ${r.seconds.toFixed(1)} s`,
      );
      expect(steps).toBeGreaterThan(0);
      // a violation of a property, never a model error (a stuck model or an out-of-range record)
      expect(what).toMatch(/assertion violated \((gv>=0|hsum<=4|hpin<=|htk<=sh\[hi\])/);
    });
  }
});
