// Times a batch of whole-protocol simulation seeds outside vitest (CPU per
// seed, events); profile it with node --cpu-prof. Arguments: a seed kind's
// label (packages/simulator/src/mix.ts, e.g. "short, 2 regions"; default "full length") and
// how many of its seeds to run (default 40).
//   node --conditions=@geoquota/source --import tsx scripts/sim-profile.ts "short, 2 regions" 200
import { DEFAULT_SEED_KINDS, HARSH_SEED_KINDS, runModel } from "@geoquota/simulator";

const kinds = [...DEFAULT_SEED_KINDS, ...HARSH_SEED_KINDS];
const label = process.argv[2] ?? "full length";
const kind = kinds.find((k) => k.label.startsWith(label));
if (kind === undefined) {
  process.stderr.write(
    `sim-profile: no seed kind "${label}" (kinds: ${kinds.map((k) => k.label).join("; ")})\n`,
  );
  process.exit(2);
}
const count = Number(process.argv[3] ?? 40);
if (!Number.isInteger(count) || count < 1) {
  process.stderr.write(`sim-profile: the seed count must be a positive integer, got "${process.argv[3]}"\n`);
  process.exit(2);
}
const t0 = process.cpuUsage();
let events = 0;
for (let seed = kind.firstSeed; seed < kind.firstSeed + count; seed++) {
  const r = await runModel(kind.scenario(seed));
  if (!r.ok) throw new Error(r.failure);
  events += r.events;
}
const cpu = process.cpuUsage(t0);
const ms = (cpu.user + cpu.system) / 1000;
process.stdout.write(
  `${kind.label}: ${count} seeds, ${ms.toFixed(0)} ms CPU, ${(ms / count).toFixed(1)} ms/seed, ` +
    `${Math.round(events / count)} events/seed (${((ms * 1000) / events).toFixed(1)} µs/event)\n`,
);
