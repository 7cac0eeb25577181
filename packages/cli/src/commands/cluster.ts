import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { colorAllowed, type LogSink } from "../cluster/logs.js";
import { startCluster } from "../cluster/orchestrator.js";
import { UsageError } from "../errors.js";
import { onStdoutClosed, stdoutClosed } from "../stdout.js";

/** stdout unless its reader has gone (EPIPE: the cluster is stopping). */
function out(text: string): void {
  if (!stdoutClosed()) process.stdout.write(text);
}

/**
 * `geoquota cluster`: runs until SIGINT/SIGTERM (or until stdout's reader
 * goes), then stops every process it started. Each process logs to its own
 * file in the log directory; `--logs` also prints the lines, prefixed.
 */
export async function run(opts: Record<string, unknown>): Promise<number> {
  const policies = opts.policies as string | undefined;
  const json = Boolean(opts.json);
  // A new directory per run by default: kept after stop, for reading what happened.
  const ownDir = opts.logDir === undefined;
  const logDir = (opts.logDir as string | undefined) ?? mkdtempSync(join(tmpdir(), "geoquota-logs-"));
  // With --json stdout carries exactly one line; the log lines go to stderr.
  const logStream = json ? process.stderr : process.stdout;
  const sink: LogSink | undefined = opts.logs
    ? {
        color: colorAllowed(logStream),
        write: (line) => {
          if (logStream === process.stdout) out(line);
          else logStream.write(line);
        },
      }
    : undefined;
  let stopping: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stopping = resolve;
  });
  const unguard = onStdoutClosed(() => stopping());
  let cluster: Awaited<ReturnType<typeof startCluster>>;
  try {
    cluster = await startCluster({
      regions: opts.regions as number,
      ...(policies ? { policiesFile: policies } : {}),
      toxiproxy: Boolean(opts.toxiproxy),
      // Commander's --no-rls: opts.rls is true unless the flag is given.
      rls: opts.rls !== false,
      logDir,
      ...(sink ? { logSink: sink } : {}),
    });
  } catch (err) {
    unguard();
    // A start that failed before any process ran leaves no empty directory behind (logs are kept).
    if (ownDir && readdirSync(logDir).length === 0) rmSync(logDir, { recursive: true, force: true });
    const msg = (err as Error).message;
    if (/policies|--regions|ConfigError|\.json/.test(msg)) throw new UsageError(msg);
    throw err;
  }
  if (json) out(`${cluster.describe()}\n`);
  else {
    const line = JSON.parse(cluster.describe()) as { adminToken?: string };
    for (const r of cluster.regions)
      out(
        `${r.id}\t${r.url}\t${r.redis}\tgossip ${r.gossipUrl}\t${r.rls !== undefined ? `rls ${r.rls}\t` : ""}config ${r.configPath}\t` +
          `pids limiter ${r.limiter.pid} daemon ${r.gossip.pid} redis ${r.redisServer.process.pid}\n`,
      );
    if (cluster.toxiproxy) out(`toxiproxy\t${cluster.toxiproxy.server.url}\n`);
    if (line.adminToken !== undefined) out(`admin token\t${line.adminToken}\n`);
    out(`logs\t${logDir}\n`);
    out("running; Ctrl-C stops every process\n");
  }
  process.once("SIGINT", stopping);
  process.once("SIGTERM", stopping);
  await stopped;
  process.off("SIGINT", stopping);
  process.off("SIGTERM", stopping);
  await cluster.stop();
  unguard();
  return 0;
}
