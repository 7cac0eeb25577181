// `geoquota demo`: the product's main job. Wires the CLI flags and the process
// (stdout, signals) to runDemo. The first SIGINT/SIGTERM ends the run early
// (the cluster is stopped and the partial run is still judged and reported);
// a second one exits at once, and the process tracker's exit hook (@geoquota/procs) kills what is left.
import { startCluster } from "../cluster/orchestrator.js";
import { UsageError } from "../errors.js";
import { runDemo } from "../demo/run-demo.js";
import { parseScenarioFlag } from "../demo/scenarios.js";

export async function run(opts: Record<string, unknown>): Promise<number> {
  const durationMs = opts.duration as number;
  const scenarios = parseScenarioFlag(String(opts.scenario ?? "all"));
  if ("error" in scenarios) throw new UsageError(scenarios.error);
  if (durationMs < 5000) throw new UsageError(`--duration: expected at least 5s, got ${durationMs}ms`);
  if (durationMs > 30 * 60_000) throw new UsageError(`--duration: expected at most 30m, got ${durationMs}ms`);
  // commander's --no-tty sets tty=false; the live view also needs a real terminal.
  const tty = opts.tty !== false && process.stdout.isTTY === true;
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`\n${signal}: stopping the demo (again to exit at once)\n`);
      controller.abort();
    } else process.exit(130);
  };
  // Installed before the cluster starts, so the process tracker defers to this handler.
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const result = await runDemo({
      durationMs,
      scenarios,
      tty,
      reportPath: String(opts.report ?? "reports/demo.html"),
      write: (s) => process.stdout.write(s),
      signal: controller.signal,
      startCluster,
    });
    return result.exitCode;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
