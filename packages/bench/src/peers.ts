// Section `peers`: geoquota beside gubernator (GLOBAL behaviour) and
// envoyproxy/ratelimit (three instances on one shared Redis, its only
// multi-region mode), all on loopback, under one workload and one Toxiproxy
// fault. Three "regions", each with its own limiter instance its clients
// talk to; every cross-region link (geoquota's gossip, gubernator's peer
// gRPC, a remote ratelimit instance → the shared Redis) goes through
// Toxiproxy with a WAN delay. One limit (C = 200, r = 200/s), open-loop
// demand 1.5·r split 60/20/20 (region 0 hot), a steady window, then region 0
// cut off from the others (from the shared Redis) for a partition window.
// Reported per system: admitted ÷ the exact bound C + r·T over the whole run
// and over the partition window, and decision latency p50/p99.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  bindRetrying,
  listeningPorts,
  type ManagedProcess,
  PortTakenError,
  type RedisServer,
  spawnManaged,
  startRedis,
  startToxiproxy,
  type ToxiproxyServer,
  waitFor,
} from "@geoquota/procs";
import { type DecisionCall, PeerLoad, type WindowFigures, windowFigures } from "./peer-load.js";
import { ensurePeer, PEER_MODULES, type PeerName } from "./peers-build.js";
import { SKEW_LIMIT, SKEW_RESOURCE, SKEW_TENANT, type SkewCluster } from "./skew.js";
import { fmt } from "./table.js";
import type { Budget, Row } from "./types.js";

export const PEERS_LIMIT = SKEW_LIMIT;
/** Round trip added to every cross-region link: half each way. */
export const WAN_RTT_MS = 40;
/** Demand split in percent per region; region 0 is hot and is the one cut off. */
export const PEERS_SPLIT = [60, 20, 20] as const;
const DEMAND_FACTOR = 1.5;
const CUT_REGION = 0;

/** The cluster the CLI starts (injected), with what this section needs beyond section 5's. */
export interface PeersCluster extends SkewCluster {
  readonly toxiproxy?: { readonly server: ToxiproxyServer; readonly proxies: readonly string[] };
  setGossipLinks(id: string, enabled: boolean): Promise<void>;
}

export type StartPeersCluster = (o: {
  regions: number;
  policiesFile: string;
  configOverrides: Record<string, unknown>;
  toxiproxy?: boolean;
}) => Promise<PeersCluster>;

export type SystemName = "geoquota" | PeerName;

export interface PeerRun {
  readonly system: SystemName;
  /** What ran: version, mode. */
  readonly detail: string;
  /** Why the system did not run (it could not be built or started); the figures are then absent. */
  readonly error?: string;
  readonly whole?: WindowFigures;
  readonly steady?: WindowFigures;
  readonly partition?: WindowFigures;
  /** Requests the generator could not send (a region at its in-flight cap). */
  readonly shed?: number;
}

export interface PeersResult {
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  readonly demandPerSecond: number;
  readonly split: string;
  readonly wanRttMs: number;
  /** Demand runs this long before the figures start. */
  readonly warmupMs: number;
  readonly steadyMs: number;
  readonly partitionMs: number;
  readonly runs: PeerRun[];
}

/** One system under test: how to ask it, how to cut region 0 off and heal, how to stop it. */
interface System {
  readonly call: DecisionCall;
  readonly detail: string;
  cut(enabled: boolean): Promise<void>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` until true; a process that exits meanwhile ends the wait at once, with its output. */
async function serving(what: string, proc: ManagedProcess, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(`${what} exited: ${proc.output().trim().slice(-1500)}`);
    }
    if (await probe()) return;
    await sleep(100);
  }
  throw new Error(`${what}: not serving after 30 s: ${proc.output().trim().slice(-1500)}`);
}

/** The WAN delay on both streams of each proxy. */
async function addWan(server: ToxiproxyServer, proxies: readonly string[]): Promise<void> {
  await Promise.all(
    proxies.flatMap((name) =>
      (["upstream", "downstream"] as const).map(async (stream) => {
        const p = await server.api.get(name);
        await p.addToxic({
          name: `wan_${stream}`,
          type: "latency",
          stream,
          toxicity: 1,
          attributes: { latency: WAN_RTT_MS / 2, jitter: 0 } as never,
        });
      }),
    ),
  );
}

async function setEnabled(server: ToxiproxyServer, proxies: readonly string[], enabled: boolean) {
  for (const name of proxies) {
    const p = await server.api.get(name);
    await p.update({ enabled, listen: p.listen, upstream: p.upstream });
  }
}

// --- geoquota ------------------------------------------------------------------

async function startGeoquota(startCluster: StartPeersCluster, dir: string): Promise<System> {
  const policiesFile = join(dir, "policies-peers.json");
  writeFileSync(
    policiesFile,
    JSON.stringify({
      default: { algorithm: "token_bucket", capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
      policies: [{ tenant: SKEW_TENANT, resource: SKEW_RESOURCE, algorithm: "token_bucket", ...PEERS_LIMIT }],
    }),
  );
  const cluster = await startCluster({ regions: 3, policiesFile, configOverrides: {}, toxiproxy: true });
  try {
    const tp = cluster.toxiproxy;
    if (!tp) throw new Error("the cluster started without Toxiproxy (toxiproxy: true was asked)");
    await addWan(
      tp.server,
      tp.proxies.filter((p) => p.startsWith("gossip_")),
    );
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  const cutId = cluster.regions[CUT_REGION]!.id;
  return {
    detail: "3-region cluster, re-weighting on (defaults)",
    call: {
      urls: cluster.regions.map((r) => `${r.url}/v1/check`),
      body: JSON.stringify({ tenant: SKEW_TENANT, resource: SKEW_RESOURCE }),
      read: (status) => (status === 200 ? true : status === 429 ? false : undefined),
    },
    cut: (enabled) => cluster.setGossipLinks(cutId, enabled),
    stop: () => cluster.stop(),
  };
}

// --- gubernator ----------------------------------------------------------------

const GUB_NAME = "peers_bench";
const GUB_KEY = "cust_ent_9942";

/** A GetRateLimits request body: a leaky bucket (continuous refill) with burst C, the bucket nearest C + r·T. */
function gubBody(hits: number): string {
  return JSON.stringify({
    requests: [
      {
        name: GUB_NAME,
        unique_key: GUB_KEY,
        hits,
        limit: PEERS_LIMIT.refillPerSecond,
        duration: 1000,
        burst: PEERS_LIMIT.capacity,
        algorithm: "LEAKY_BUCKET",
        behavior: "GLOBAL",
      },
    ],
  });
}

function gubRead(status: number, body: string): boolean | undefined {
  if (status !== 200) return undefined;
  const r = (JSON.parse(body) as { responses?: { status?: string; error?: string }[] }).responses?.[0];
  if (!r || r.error) return undefined;
  return r.status === "UNDER_LIMIT" ? true : r.status === "OVER_LIMIT" ? false : undefined;
}

async function httpJson(url: string, body?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    ...(body === undefined ? {} : { body, headers: { "content-type": "application/json" } }),
    signal: AbortSignal.timeout(2000),
  });
  return { status: res.status, text: await res.text() };
}

interface GubInstance {
  readonly proc: ManagedProcess;
  readonly http: string;
  /** The advertised gRPC address: its Toxiproxy proxy, which every peer dials. */
  readonly advertise: string;
  readonly memberlist: string;
}

/** One gubernator on candidate ports (it needs its addresses up front), again on others when one was taken. */
async function startGubInstance(
  binary: string,
  tp: ToxiproxyServer,
  index: number,
  known: string | undefined,
): Promise<GubInstance> {
  const proxyName = `gub_${index}`;
  const proxy = await tp.proxy(proxyName, "127.0.0.1:1"); // upstream set once the instance has its port
  return await bindRetrying(`gubernator ${index}`, async (port) => {
    const grpc = `127.0.0.1:${port}`;
    const http = `127.0.0.1:${port + 1}`;
    // member-list keys its peers by IP: each instance's gossip on a loopback address of its own.
    const memberlist = `127.0.0.${2 + index}:${port + 2}`;
    await tp.setUpstream(proxyName, grpc);
    // member-list names each node by its host name, and three on one host would be one node: each
    // runs in a UTS namespace of its own (root; the network is still the host's loopback).
    const proc = spawnManaged(
      "unshare",
      ["--uts", "sh", "-c", 'hostname "$0" && exec "$1"', `gub-${index}`, binary],
      {
        GUBER_GRPC_ADDRESS: grpc,
        GUBER_HTTP_ADDRESS: http,
        GUBER_ADVERTISE_ADDRESS: proxy.listen,
        GUBER_INSTANCE_ID: `region-${index}`,
        GUBER_PEER_DISCOVERY_TYPE: "member-list",
        GUBER_MEMBERLIST_ADDRESS: memberlist,
        GUBER_MEMBERLIST_BIND_ADDRESS: memberlist, // else it binds 0.0.0.0:7946 and advertises the above
        OTEL_TRACES_EXPORTER: "none", // else its OTLP exporter looks for a collector
        // The first one names itself: member-list insists on a known host.
        GUBER_MEMBERLIST_KNOWN_NODES: known ?? memberlist,
        GUBER_LOG_LEVEL: "error",
      },
    );
    try {
      await serving(`gubernator ${index} on ${http}`, proc, async () => {
        try {
          return (await httpJson(`http://${http}/v1/HealthCheck`)).status === 200;
        } catch {
          return false;
        }
      });
    } catch (err) {
      await proc.stop();
      const out = proc.output();
      if (/address already in use/i.test(out)) throw new PortTakenError(port, out.slice(-300));
      throw err;
    }
    return { proc, http, advertise: proxy.listen, memberlist };
  });
}

async function startGubernator(binary: string): Promise<System> {
  const tp = await startToxiproxy();
  const instances: GubInstance[] = [];
  const stop = async () => {
    await Promise.all(instances.map((i) => i.proc.stop()));
    await tp.stop();
  };
  try {
    for (let i = 0; i < 3; i++) {
      instances.push(await startGubInstance(binary, tp, i, instances[0]?.memberlist));
    }
    // Every instance sees all three (its HealthCheck's peer_count) before the run.
    await waitFor(
      "gubernator: 3 peers in every instance",
      async () => {
        const counts = await Promise.all(
          instances.map(async (i) => {
            const { text } = await httpJson(`http://${i.http}/v1/HealthCheck`);
            return Number((JSON.parse(text) as { peer_count?: number | string }).peer_count ?? 0);
          }),
        );
        return counts.every((n) => n === 3);
      },
      30_000,
      200,
    );
    // GLOBAL: one instance owns the key and broadcasts; a non-owner answers with the owner's
    // address. The owner becomes region 0 (the one cut off): cutting it isolates it from both others.
    const probe = await httpJson(`http://${instances[0]!.http}/v1/GetRateLimits`, gubBody(0));
    const owner = (JSON.parse(probe.text) as { responses?: { metadata?: Record<string, string> }[] })
      .responses?.[0]?.metadata?.owner;
    const ownerIndex = owner === undefined ? 0 : instances.findIndex((i) => i.advertise === owner);
    if (ownerIndex < 0) throw new Error(`gubernator: owner ${owner} is none of the instances' addresses`);
    const ordered = [instances[ownerIndex]!, ...instances.filter((_, k) => k !== ownerIndex)];
    const proxies = instances.map((_, k) => `gub_${k}`);
    await addWan(tp, proxies);
    return {
      detail: `${PEER_MODULES.gubernator.version}, 3 instances (member-list), GLOBAL, leaky bucket burst C`,
      call: {
        urls: ordered.map((i) => `http://${i.http}/v1/GetRateLimits`),
        body: gubBody(1),
        read: gubRead,
      },
      // Every peer link goes through the proxy in front of the instance it dials: disabling the three
      // cuts the owner off both ways (the link between the two non-owners carries nothing for this key).
      cut: (enabled) => setEnabled(tp, proxies, enabled),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// --- envoyproxy/ratelimit --------------------------------------------------------

const RL_DOMAIN = "peers_bench";
const RL_BODY = JSON.stringify({
  domain: RL_DOMAIN,
  descriptors: [{ entries: [{ key: "tenant", value: SKEW_TENANT }] }],
});

function rlRead(status: number): boolean | undefined {
  return status === 200 ? true : status === 429 ? false : undefined;
}

/** Its HTTP port, among the TCP ports it bound (port 0: HTTP and debug): the one whose /json decides. */
async function rlHttpPort(proc: ManagedProcess): Promise<number | undefined> {
  for (const port of listeningPorts(proc.pid) ?? []) {
    try {
      const { text } = await httpJson(`http://127.0.0.1:${port}/json`, RL_BODY);
      if (text.includes("overallCode")) return port;
    } catch {
      // not this one
    }
  }
  return undefined;
}

async function startEnvoyRatelimit(binary: string, dir: string): Promise<System> {
  // Its configuration: one descriptor, r per second (a fixed window: its only algorithm).
  const root = join(dir, "rl-runtime");
  const cfgDir = join(root, "ratelimit", "config");
  mkdirSync(cfgDir, { recursive: true });
  writeFileSync(
    join(cfgDir, "peers.yaml"),
    `domain: ${RL_DOMAIN}\ndescriptors:\n  - key: tenant\n    value: ${SKEW_TENANT}\n    rate_limit:\n      unit: second\n      requests_per_unit: ${PEERS_LIMIT.refillPerSecond}\n`,
  );
  let redis: RedisServer | undefined;
  let tp: ToxiproxyServer | undefined;
  const procs: ManagedProcess[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await tp?.stop();
    await redis?.stop();
  };
  try {
    redis = await startRedis();
    tp = await startToxiproxy();
    // The shared Redis lives in region 1; regions 0 and 2 reach it over the WAN. Region 1's link
    // goes through a proxy too (no delay), so every instance is started the same way.
    const proxies = ["rl_redis_0", "rl_redis_1", "rl_redis_2"];
    const listens: string[] = [];
    for (const name of proxies) listens.push((await tp.proxy(name, `${redis.host}:${redis.port}`)).listen);
    await addWan(tp, ["rl_redis_0", "rl_redis_2"]);
    const urls: string[] = [];
    for (let i = 0; i < 3; i++) {
      const proc = spawnManaged(binary, [], {
        HOST: "127.0.0.1",
        PORT: "0",
        DEBUG_HOST: "127.0.0.1",
        DEBUG_PORT: "0",
        GRPC_UDS: join(dir, `rl-${i}.sock`),
        USE_STATSD: "false",
        LOG_LEVEL: "error",
        RUNTIME_ROOT: root,
        RUNTIME_SUBDIRECTORY: "ratelimit",
        RUNTIME_WATCH_ROOT: "false",
        REDIS_SOCKET_TYPE: "tcp",
        REDIS_URL: listens[i]!,
      });
      procs.push(proc);
      let port: number | undefined;
      await serving(`envoyproxy/ratelimit ${i}`, proc, async () => {
        port = await rlHttpPort(proc);
        return port !== undefined;
      });
      urls.push(`http://127.0.0.1:${port}/json`);
    }
    const server = tp;
    return {
      detail: `${PEER_MODULES["envoy-ratelimit"].version.slice(0, 6)}… (main), 3 instances, one Redis, fixed 1 s window`,
      call: { urls, body: RL_BODY, read: rlRead },
      cut: (enabled) => setEnabled(server, ["rl_redis_0"], enabled),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// --- the run -----------------------------------------------------------------------

async function measure(system: System, w: { warmupMs: number; steadyMs: number; partitionMs: number }) {
  const demand = DEMAND_FACTOR * PEERS_LIMIT.refillPerSecond;
  const load = new PeerLoad(system.call);
  load.setRates(PEERS_SPLIT.map((p) => (p / 100) * demand));
  load.start();
  // Unmeasured: JIT, connection pools, a peer's first sync. The bound holds over every interval, so
  // the figures start after it, the bucket wherever the warm-up left it.
  await sleep(w.warmupMs);
  const t0 = load.now();
  await sleep(w.steadyMs);
  const cutAt = load.now();
  await system.cut(false);
  await sleep(w.partitionMs);
  const healAt = load.now();
  load.setRates(PEERS_SPLIT.map(() => 0));
  await system.cut(true);
  await load.stop();
  return {
    whole: windowFigures(load.answers, t0, healAt, PEERS_LIMIT),
    steady: windowFigures(load.answers, t0, cutAt, PEERS_LIMIT),
    partition: windowFigures(load.answers, cutAt, healAt, PEERS_LIMIT),
    shed: load.shed,
  };
}

export interface PeersOptions {
  /** Build timeout per peer (default 15 min): a smoke run that cannot build reports it. */
  readonly buildTimeoutMs?: number;
}

export async function benchPeers(
  startCluster: StartPeersCluster,
  budget: Budget,
  o: PeersOptions = {},
): Promise<PeersResult> {
  const warmupMs = budget.smoke ? 1000 : 3000;
  const steadyMs = budget.smoke ? 1500 : 8000;
  const partitionMs = budget.smoke ? 1500 : 8000;
  const dir = mkdtempSync(join(tmpdir(), "geoquota-bench-peers-"));
  const runs: PeerRun[] = [];
  const run = async (system: SystemName, detail: string, start: () => Promise<System>) => {
    let s: System;
    try {
      s = await start();
    } catch (err) {
      runs.push({ system, detail, error: `could not start: ${(err as Error).message.slice(0, 500)}` });
      return;
    }
    try {
      runs.push({ system, detail: s.detail, ...(await measure(s, { warmupMs, steadyMs, partitionMs })) });
    } finally {
      await s.stop();
    }
  };
  try {
    await run("geoquota", "3-region cluster", () => startGeoquota(startCluster, dir));
    for (const peer of ["gubernator", "envoy-ratelimit"] as const) {
      const m = PEER_MODULES[peer];
      const bin = await ensurePeer(peer, o.buildTimeoutMs ? { timeoutMs: o.buildTimeoutMs } : {});
      if (!bin.ok) {
        runs.push({ system: peer, detail: `${m.pkg}@${m.version}`, error: bin.error });
        continue;
      }
      await run(peer, `${m.pkg}@${m.version}`, () =>
        peer === "gubernator" ? startGubernator(bin.path) : startEnvoyRatelimit(bin.path, dir),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    limit: PEERS_LIMIT,
    demandPerSecond: DEMAND_FACTOR * PEERS_LIMIT.refillPerSecond,
    split: PEERS_SPLIT.join("/"),
    wanRttMs: WAN_RTT_MS,
    warmupMs,
    steadyMs,
    partitionMs,
    runs,
  };
}

const SECTION = "10 peers, partition";

/** The section's rows: per system, admitted ÷ bound (whole run, partition window) and decision latency. */
export function peersRows(p: PeersResult): Row[] {
  const rows: Row[] = [];
  const f2 = (x: number) => fmt.num(x, 2);
  for (const r of p.runs) {
    if (r.error !== undefined || !r.whole || !r.steady || !r.partition) {
      rows.push({
        section: SECTION,
        metric: `${r.system}: not run`,
        // One line in the table; the JSON keeps the whole message.
        value: (r.error ?? "no figures").replace(/\s+/g, " ").slice(0, 160),
        target: "",
      });
      continue;
    }
    const over = Math.max(r.whole.admittedOverBound, r.partition.admittedOverBound);
    rows.push(
      {
        section: SECTION,
        metric: `${r.system}: admitted ÷ (C + r·T), whole run / partition`,
        value: `${f2(r.whole.admittedOverBound)} / ${f2(r.partition.admittedOverBound)}`,
        target: "≤ 1.00",
        met: over <= 1,
      },
      {
        section: SECTION,
        metric: `${r.system}: decision p50 / p99, steady | partition`,
        value: `${fmt.us(r.steady.p50Us)} / ${fmt.us(r.steady.p99Us)} | ${fmt.us(r.partition.p50Us)} / ${fmt.us(r.partition.p99Us)}`,
        target: "",
      },
      {
        section: SECTION,
        metric: `${r.system}: errors in partition; failing open, admitted ÷ bound`,
        value: `${fmt.int(r.partition.errors)}; ${f2(r.partition.failOpenOverBound)}`,
        target: "",
      },
    );
  }
  return rows;
}
