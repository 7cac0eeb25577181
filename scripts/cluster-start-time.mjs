#!/usr/bin/env node
// Time from `geoquota cluster --json` to its JSON line (3 regions: three
// redis-servers, three limiter services, three gossip daemons), the built JS
// against the TypeScript sources through tsx, side by side, alternating runs.
//   node scripts/cluster-start-time.mjs [runs=3]
// Needs the build (scripts/build.sh).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const bin = fileURLToPath(new URL("../packages/cli/bin/geoquota.mjs", import.meta.url));
const runs = Number(process.argv[2] ?? 3);

function once(fromSource) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const env = { ...process.env, ...(fromSource ? { GQ_FROM_SOURCE: "1" } : {}) };
    const child = spawn(process.execPath, [bin, "cluster", "--json"], {
      env,
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

const rows = { built: [], source: [] };
for (let i = 0; i < runs; i++) {
  rows.built.push(await once(false));
  rows.source.push(await once(true));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [k, xs] of Object.entries(rows))
  console.log(
    `${k.padEnd(6)} median ${(median(xs) / 1000).toFixed(2)} s  runs ${xs.map((x) => (x / 1000).toFixed(2)).join(" ")}`,
  );
console.log(`built/source: ${(median(rows.built) / median(rows.source)).toFixed(2)}`);
