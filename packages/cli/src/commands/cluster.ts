import { startCluster } from "../cluster/orchestrator.js";
import { UsageError } from "../errors.js";

/** `geoquota cluster`: runs until SIGINT/SIGTERM, then stops every process it started. */
export async function run(opts: Record<string, unknown>): Promise<number> {
  const policies = opts.policies as string | undefined;
  let cluster: Awaited<ReturnType<typeof startCluster>>;
  try {
    cluster = await startCluster({
      regions: opts.regions as number,
      ...(policies ? { policiesFile: policies } : {}),
      toxiproxy: Boolean(opts.toxiproxy),
    });
  } catch (err) {
    const msg = (err as Error).message;
    if (/policies|--regions|ConfigError|\.json/.test(msg)) throw new UsageError(msg);
    throw err;
  }
  if (opts.json) process.stdout.write(`${cluster.describe()}\n`);
  else {
    for (const r of cluster.regions)
      process.stdout.write(`${r.id}\t${r.url}\t${r.redis}\tgossip ${r.gossipUrl}\n`);
    if (cluster.toxiproxy) process.stdout.write(`toxiproxy\t${cluster.toxiproxy.server.url}\n`);
    process.stdout.write("running; Ctrl-C stops every process\n");
  }
  await new Promise<void>((resolve) => {
    const done = () => resolve();
    process.once("SIGINT", done);
    process.once("SIGTERM", done);
  });
  await cluster.stop();
  return 0;
}
