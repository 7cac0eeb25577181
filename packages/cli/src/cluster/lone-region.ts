// One region as `geoquota gossip` runs it (a redis-server and the gossip daemon process, the
// bundled build) among peers that are not processes: each peer is a gossip mesh endpoint in
// this process that authenticates like a daemon, sends the delta frames its caller hands it,
// acknowledges every delta the region sends it and says it hears every other peer (links), so
// the region relays nothing, as in a healthy full mesh. What the region does with its peers'
// traffic (merges, reads, shipping) is then measured on the region alone, at key counts whose
// peers could not all run as processes on one machine (bench section 13, issue 24 point 7).
// The region's limiter is not started: its checks go straight to its Redis (the bench's store).
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPolicies } from "@geoquota/config";
import { decodeFrame, type DeltaEntry, encodeFrame } from "@geoquota/crdt";
import { Mesh } from "@geoquota/gossip";
import { initFreshRegion } from "@geoquota/limiter";
import { spawnManaged, startRedis } from "@geoquota/procs";
import { ROLE_NODE_FLAGS } from "./orchestrator.js";
import { READY_IPC_ENV, readySignal } from "./ready.js";

export interface LoneRegionOptions {
  /** Peers besides the region (2..63). */
  readonly peers: number;
  /** The policies file every region reads. */
  readonly policiesFile: string;
}

export interface LoneRegion {
  /** The region's id (`a0`: the smallest, so it dials every peer). */
  readonly id: string;
  /** The peers' ids (`b1`, `b2`, …). */
  readonly peers: readonly string[];
  /** The region's Redis URL. */
  readonly redis: string;
  /** The daemon's HTTP (/metrics, /v1/status). */
  readonly gossipUrl: string;
  readonly configPath: string;
  readonly policiesPath: string;
  readonly gossip: { readonly child: { readonly pid?: number | undefined } };
  /** Sends the region one delta frame from `peer` (≤ 1,000 entries: the decoder's and the daemon's frame size). */
  send(peer: string, entries: readonly DeltaEntry[]): boolean;
  /** Delta frames the peers received from the region, and their bytes. */
  received(): { frames: number; bytes: number };
  /** Peers whose link to the region is up (the region dials them after it starts). */
  linksUp(): number;
  stop(): Promise<void>;
}

const binPath = fileURLToPath(new URL("../../bin/geoquota.mjs", import.meta.url));
const SECRET = "lone-region-bench-secret";
const START_TIMEOUT_MS = 120_000;

export async function startLoneRegion(options: LoneRegionOptions): Promise<LoneRegion> {
  const n = options.peers;
  if (!Number.isInteger(n) || n < 2 || n > 63) throw new Error(`peers: expected 2..63, got ${n}`);
  const id = "a0";
  const peers = Array.from({ length: n }, (_, i) => `b${i + 1}`);
  const dir = mkdtempSync(join(tmpdir(), "geoquota-lone-"));
  const policiesPath = join(dir, "policies.json");
  const ids = [id, ...peers];
  loadPolicies(options.policiesFile, ids); // a bad file names itself before anything starts
  copyFileSync(options.policiesFile, policiesPath);
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const redis = await startRedis();
    stops.push(() => redis.stop());
    const c = redis.client();
    await initFreshRegion(c);
    c.disconnect();
    const counts = { frames: 0, bytes: 0 };
    const meshes = new Map<string, Mesh>();
    for (const peer of peers) {
      let mesh: Mesh | undefined;
      mesh = new Mesh(
        {
          self: peer,
          listen: { host: "127.0.0.1", port: 0 },
          peers: [{ id }],
          secret: SECRET,
          // The region sends up to 16 frames per round: never shed here.
          inboundFramesPerSecondMax: 100_000,
          frameBytesMax: 16 * 1024 * 1024,
          sendBufferedBytesMax: 64 * 1024 * 1024,
        },
        {
          handlers: {
            onFrame: (from, bytes) => {
              const f = decodeFrame(bytes, { frameBytesMax: 16 * 1024 * 1024 });
              if (!f.ok || f.value.kind !== "delta") return;
              counts.frames++;
              counts.bytes += bytes.byteLength;
              if (f.value.version > 0)
                mesh?.send(from, encodeFrame({ kind: "ack", from: peer, version: f.value.version }));
            },
          },
        },
      );
      await mesh.start();
      const m = mesh;
      stops.push(() => m.stop());
      meshes.set(peer, mesh);
    }
    const configPath = join(dir, `${id}.json`);
    writeFileSync(
      configPath,
      `${JSON.stringify(
        {
          region: id,
          listen: { host: "127.0.0.1", port: 0 },
          redis: { url: redis.url, timeoutMs: 200 },
          regions: ids.map((r) => ({
            id: r,
            gossip: r === id ? "127.0.0.1:0" : `127.0.0.1:${meshes.get(r)!.port()}`,
          })),
          gossip: {
            listen: { host: "127.0.0.1", port: 0 },
            http: { host: "127.0.0.1", port: 0 },
            plaintext: true,
          },
          // Static policies: the peers speak no rollout frames.
          policy: { replicated: false },
          sharedSecret: SECRET,
          adminToken: "lone-region-admin",
          policiesFile: policiesPath,
        },
        null,
        2,
      )}\n`,
    );
    // The node flags the local cluster gives a daemon (its young generation kept small).
    const args = [...ROLE_NODE_FLAGS.gossip, binPath, "gossip", "--config", configPath];
    const proc = spawnManaged(process.execPath, args, { [READY_IPC_ENV]: "1" }, { ipc: true });
    stops.push(() => proc.stop());
    const listeners = await readySignal(proc, `gossip ${id} up`, START_TIMEOUT_MS, ["http"]);
    // Each peer hears every other: the region relays nothing (frames.ts relayTo).
    const sendLinks = (peer: string) =>
      meshes
        .get(peer)
        ?.send(id, encodeFrame({ kind: "links", from: peer, up: peers.filter((p) => p !== peer) }));
    const versions = new Map<string, number>(peers.map((p) => [p, Date.now() * 1000]));
    return {
      id,
      peers,
      redis: redis.url,
      gossipUrl: `http://${listeners.http}`,
      configPath,
      policiesPath,
      gossip: proc,
      send(peer, entries) {
        const mesh = meshes.get(peer);
        if (mesh === undefined) throw new Error(`unknown peer ${peer}`);
        sendLinks(peer);
        const version = (versions.get(peer) ?? 0) + 1;
        versions.set(peer, version);
        return mesh.send(id, encodeFrame({ kind: "delta", from: peer, version, entries: [...entries] }));
      },
      received: () => ({ ...counts }),
      linksUp: () => peers.filter((p) => meshes.get(p)?.isUp(id)).length,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
