// `geoquota chaos`: wires the flags and the process (stdout, signals) to
// runChaos. Without --seed a seed is drawn and printed first, so any run can
// be replayed. The first SIGINT/SIGTERM ends the run early (the partial run is
// still judged and reported); a second exits at once. `--soak D` runs the
// soak (soak.ts) instead of the scenarios.
import { join } from "node:path";
import { startCluster } from "../cluster/orchestrator.js";
import { runChaos } from "../chaos/run-chaos.js";
import { parseScenarioName } from "../chaos/scenarios.js";
import { runSoak, SOAK_MIN_MS } from "../chaos/soak.js";
import { UsageError } from "../errors.js";

export async function run(opts: Record<string, unknown>): Promise<number> {
  const durationMs = opts.duration as number;
  const soakMs = opts.soak as number | undefined;
  if (soakMs !== undefined) {
    if (opts.scenario !== undefined)
      throw new UsageError(
        "--soak runs its own schedule of every fault: give --scenario or --soak, not both",
      );
    if (soakMs < SOAK_MIN_MS)
      throw new UsageError(`--soak: expected at least ${SOAK_MIN_MS / 1000}s, got ${soakMs}ms`);
    if (soakMs > 24 * 3_600_000) throw new UsageError(`--soak: expected at most 24h, got ${soakMs}ms`);
  } else if (opts.reportDir !== undefined) throw new UsageError("--report-dir: only with --soak");
  const scenario = parseScenarioName(String(opts.scenario ?? "all"));
  if (typeof scenario === "object") throw new UsageError(scenario.error);
  if (durationMs < 3000) throw new UsageError(`--duration: expected at least 3s, got ${durationMs}ms`);
  if (durationMs > 24 * 3_600_000)
    throw new UsageError(`--duration: expected at most 24h, got ${durationMs}ms`);
  const seed = typeof opts.seed === "number" ? opts.seed : Math.floor(Math.random() * 2 ** 31);
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`\n${signal}: stopping the chaos run (again to exit at once)\n`);
      controller.abort();
    } else process.exit(130);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    if (soakMs !== undefined) {
      const { exitCode } = await runSoak({
        seed,
        durationMs: soakMs,
        reportDir: String(opts.reportDir ?? join(".tmp", `soak-${seed}`)),
        write: (s) => process.stdout.write(s),
        signal: controller.signal,
        startCluster,
      });
      return exitCode;
    }
    const { exitCode } = await runChaos({
      seed,
      durationMs,
      scenario,
      reportPath: String(opts.report ?? "reports/chaos.json"),
      write: (s) => process.stdout.write(s),
      signal: controller.signal,
      startCluster,
    });
    return exitCode;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
