#!/usr/bin/env node
// npm run model:full: the exhaustive runs of the safe Spin model too large for
// npm test (model/slices.json "full"), one at a time through model/check.sh
// (each pan run stays under GQ_MODEL_MEMLIM_MB, default 3500 MB, on the
// shared machine; a slice's memlimMb raises it for that slice). Prints
// check.sh's RESULT line (states, depth, time) per
// slice and a summary; exits 1 when any run did not end complete with no
// error (a counterexample, a truncated search, a memory abort, a crash).
//   node scripts/model-full.mjs [name-substring...]   (only the matching slices)
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("../", import.meta.url).pathname;
const { full } = JSON.parse(readFileSync(join(root, "model/slices.json"), "utf8"));
const only = process.argv.slice(2);
const chosen = full.filter(
  (s) => only.length === 0 || only.some((o) => `${s.n}:${s.name}:${(s.defs ?? []).join(" ")}`.includes(o)),
);
if (chosen.length === 0) {
  console.error(`model-full: no slice of model/slices.json "full" matches ${only.join(", ")}`);
  process.exit(2);
}
const verdicts = { 0: "complete", 1: "COUNTEREXAMPLE", 3: "INCOMPLETE (truncated, memory abort or crash)" };
let failed = 0;
const lines = [];
for (const s of chosen) {
  const label = `${s.n} regions${s.defs?.length ? ` ${s.defs.join(" ")}` : ""} ${s.name}`;
  console.log(`\n== ${label}: ${s.covers}`);
  const env = { ...process.env, GQ_PLANT: "0", GQ_MODEL_DEFS: (s.defs ?? []).join(" ") };
  for (const [k, v] of Object.entries(s.env)) env[k] = String(v);
  // A slice measured to need more than check.sh's default (every feature at once: ~7 GB).
  if (s.memlimMb !== undefined && Number(env.GQ_MODEL_MEMLIM_MB ?? 0) < s.memlimMb)
    env.GQ_MODEL_MEMLIM_MB = String(s.memlimMb);
  const r = spawnSync(
    "bash",
    [
      join(root, "model/check.sh"),
      join(root, ".tmp/model-full"),
      String(s.n),
      "exhaustive",
      ...(s.pan ?? []),
    ],
    { env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 28 },
  );
  const out = r.stdout ?? "";
  // pan's summary, without its list of unreached states
  process.stdout.write(out.split("\nunreached in proctype")[0]);
  const result = /^RESULT .*$/m.exec(out)?.[0] ?? "RESULT none";
  const verdict = verdicts[r.status] ?? `check.sh exit ${r.status}`;
  if (r.status !== 0) failed++;
  lines.push(`${verdict.padEnd(14)} ${label}: ${result}`);
  console.log(`\n${result}`);
}
console.log(`\nmodel-full: ${chosen.length - failed} of ${chosen.length} slices complete with no error`);
for (const l of lines) console.log(`  ${l}`);
process.exit(failed ? 1 : 0);
