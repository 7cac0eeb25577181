import { runGossip } from "@geoquota/gossip";
import { closeChannel, endpoint, onPeers, reportReady, startedByOrchestrator } from "../cluster/ready.js";

/** `geoquota gossip --config F`: the region's gossip daemon, until SIGINT/SIGTERM. */
export async function run(opts: Record<string, unknown>): Promise<number> {
  // Started by the orchestrator: it reads the real addresses back and hands
  // over the peers' (which exist only once those daemons have bound).
  const orchestrated = startedByOrchestrator();
  await runGossip(String(opts.config), {
    anyPortIfTaken: orchestrated,
    peersFromStarter: orchestrated,
    onStarted: (running) => {
      onPeers((peers) => {
        for (const [peer, address] of Object.entries(peers)) {
          try {
            running.setPeerAddress(peer, address);
          } catch (err) {
            process.stderr.write(`geoquota gossip: peer ${peer}: ${(err as Error).message}\n`);
          }
        }
      });
      reportReady(
        {
          gossip: endpoint(running.mesh.config.listen.host, running.mesh.port()),
          http: endpoint(running.httpHost, running.httpPort),
        },
        { keepChannel: true },
      );
    },
  });
  closeChannel();
  return 0;
}
