// Run: pnpm tsx packages/crdt/bench/merge.bench.ts
// Prints counter merges per second and encoded bytes per changed key.
import { runCrdtBench } from "../src/index.js";

const r = runCrdtBench();
const fmt = (n: number): string => Math.round(n).toLocaleString("en-US");
const rows: Array<[string, string, string]> = [
  ["counter-entry merges/s (every entry an update)", fmt(r.counterMergesPerSecond), ">= 1,000,000"],
  ["counter-entry merges/s (duplicates, no change)", fmt(r.counterNoopMergesPerSecond), ""],
  ["delta frames encode+decode/s (100 keys)", fmt(r.encodeDecodeFramesPerSecond), ""],
  ...r.bytes.map((b): [string, string, string] => [
    `bytes per changed key: ${b.name}`,
    b.bytesPerChangedKey.toFixed(1),
    b.name.startsWith("admitted only") ? "<= 64" : "",
  ]),
];
const w0 = Math.max(...rows.map((x) => x[0].length));
const w1 = Math.max(...rows.map((x) => x[1].length));
console.log(`| ${"metric".padEnd(w0)} | ${"value".padStart(w1)} | target |`);
console.log(`|${"-".repeat(w0 + 2)}|${"-".repeat(w1 + 2)}|--------|`);
for (const [a, b, c] of rows) console.log(`| ${a.padEnd(w0)} | ${b.padStart(w1)} | ${c} |`);
console.log(`(${r.changedKeys} changed keys per delta frame; node ${process.version})`);
