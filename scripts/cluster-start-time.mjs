#!/usr/bin/env node
// Time from `geoquota cluster --json` to its JSON line (3 regions: three
// redis-servers, three limiter services, three gossip daemons), side by side,
// alternating runs:
//   bundled  the default: one esbuild bundle per process (dist/bundle/)
//   built    the tsc output, one file per module (GQ_UNBUNDLED=1)
//   source   the TypeScript sources through tsx (GQ_FROM_SOURCE=1)
//   against  with --against DIR, the `geoquota` bin of another built checkout
//            (e.g. an older commit, for a before/after figure)
//   node scripts/cluster-start-time.mjs [runs=3] [--against DIR] [--only bundled,built,...]
// Needs the build (scripts/build.sh).
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { against: { type: "string" }, only: { type: "string" } },
});
const bin = fileURLToPath(new URL("../packages/cli/bin/geoquota.mjs", import.meta.url));
const runs = Number(positionals[0] ?? 3);
if (!Number.isInteger(runs) || runs < 1)
  throw new Error(`runs: expected a positive integer, got ${positionals[0]}`);

const variants = {
  bundled: { bin, env: {} },
  built: { bin, env: { GQ_UNBUNDLED: "1" } },
  source: { bin, env: { GQ_FROM_SOURCE: "1" } },
  ...(values.against
    ? { against: { bin: resolve(values.against, "packages/cli/bin/geoquota.mjs"), env: {} } }
    : {}),
};
const chosen = values.only ? values.only.split(",") : Object.keys(variants);
for (const k of chosen) if (!(k in variants)) throw new Error(`--only: unknown variant ${k}`);

function once({ bin, env }) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, [bin, "cluster", "--json"], {
      env: { ...process.env, GQ_UNBUNDLED: "", GQ_FROM_SOURCE: "", ...env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        child.once("exit", () => resolve(ms));
        child.kill("SIGTERM");
      }
    });
    child.once("exit", (code) => {
      if (!out.includes("\n")) reject(new Error(`cluster exited ${code} before its JSON line`));
    });
  });
}

const rows = Object.fromEntries(chosen.map((k) => [k, []]));
for (let i = 0; i < runs; i++) for (const k of chosen) rows[k].push(await once(variants[k]));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [k, xs] of Object.entries(rows))
  console.log(
    `${k.padEnd(7)} median ${(median(xs) / 1000).toFixed(2)} s  runs ${xs.map((x) => (x / 1000).toFixed(2)).join(" ")}`,
  );
