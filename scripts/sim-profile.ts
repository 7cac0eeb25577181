// Runs a batch of whole-protocol simulation seeds outside vitest and prints
// the CPU time per seed (profile with: node --cpu-prof --import tsx ...).
//   node --conditions=@geoquota/source --import tsx scripts/sim-profile.ts [count] [firstSeed]
import { runModel, scenarioFor } from "../packages/gossip/src/model/index.js";

const count = Number(process.argv[2] ?? 40);
const first = Number(process.argv[3] ?? 1);
const t0 = process.cpuUsage();
let events = 0;
for (let seed = first; seed < first + count; seed++) {
  const r = await runModel(scenarioFor(seed));
  if (!r.ok) throw new Error(r.failure);
  events += r.events;
}
const cpu = process.cpuUsage(t0);
const ms = (cpu.user + cpu.system) / 1000;
process.stdout.write(
  `${count} seeds: ${ms.toFixed(0)} ms CPU, ${(ms / count).toFixed(1)} ms/seed, ${events} events (${((ms * 1000) / events).toFixed(2)} µs/event)\n`,
);
