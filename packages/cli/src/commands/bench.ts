// `geoquota bench`: wires the flags, stdout and the local-cluster orchestrator
// to @geoquota/bench (which cannot import the CLI: the CLI depends on it).
import { runBench } from "@geoquota/bench";
import { startLoneRegion } from "../cluster/lone-region.js";
import { startCluster } from "../cluster/orchestrator.js";

export async function run(opts: Record<string, unknown>): Promise<number> {
  await runBench({
    smoke: opts.smoke === true,
    outPath: String(opts.out ?? "reports/bench.json"),
    write: (s) => process.stdout.write(s),
    startCluster,
    startLoneRegion,
    ...(typeof opts.section === "string" ? { sections: opts.section.split(",").map((x) => x.trim()) } : {}),
  });
  return 0;
}
