// `geoquota gossip --config F`: one region's daemon as a process. Wires the
// region config to the Redis store, the WebSocket mesh and a small HTTP
// server for /healthz, /readyz, /metrics and /v1/status.
import { accessSync, constants } from "node:fs";
import { createServer, type Server } from "node:http";
import {
  ConfigError,
  loadPolicies,
  loadRegionConfig,
  type PolicySet,
  parsePolicies,
  quotaKey,
  readJsonFile,
  type RegionConfig,
  resolvePolicy,
} from "@geoquota/config";
import {
  checkRedisSetup,
  connectRedis,
  isCluster,
  WAKE_CHANNEL,
  createCertifier,
  SETUP_SETTINGS,
  type SetupDriftChange,
  waitReady,
} from "@geoquota/redis";
import {
  type CertifiedWrite,
  popProposals,
  pushProposal,
  readSnapshotRaw,
  writeSnapshot,
} from "@geoquota/rollout";
import { keyPartHasher } from "@geoquota/core";
import { logLevelOf, ThrottledEvents } from "@geoquota/config";
import { collectProcessMetrics, listenServer } from "@geoquota/edge";
import pino from "pino";
import { Gauge, Registry } from "prom-client";
import { Mesh } from "../transport/index.js";
import type { ClockCheckOptions } from "./clock-offsets.js";
import { GossipDaemon, type PolicyResolver } from "./daemon.js";
import { createDaemonMetrics } from "./metrics.js";
import { watchRecovery } from "./recovery.js";
import { createRedisDaemonStore } from "./redis-port.js";
import { quotaInterner } from "./store-port.js";
import { RolloutStep, rolloutPolicyResolver } from "./rollout-step.js";

export interface RunningGossip {
  readonly daemon: GossipDaemon;
  readonly mesh: Mesh;
  readonly httpPort: number;
  readonly httpHost: string;
  /**
   * Gives a peer's gossip address (`host:port`): one the config left at port 0
   * (not known when this daemon started), or one that moved (a restarted peer
   * that had to take another port).
   */
  setPeerAddress(peer: string, endpoint: string): void;
  /** Present when policies are replicated (config policy.replicated). */
  readonly rollout: RolloutStep | undefined;
  /**
   * SIGHUP: re-reads the policies file and proposes it as a new version (the
   * daemon makes it one next round unless it equals the target). A bad file
   * is refused whole; the returned line (also logged) names the field.
   */
  reloadPolicies(): Promise<{ ok: boolean; message: string }>;
  close(): Promise<void>;
}

/**
 * TLS material for the mesh, checked readable here so a bad path is an error
 * naming the config field rather than a bare ENOENT from the transport.
 */
function meshTls(config: RegionConfig): { keyPath: string; certPath: string; caPath: string } | undefined {
  const tls = config.gossip.tls;
  if (tls === undefined) return undefined;
  const problems: string[] = [];
  for (const field of ["cert", "key", "ca"] as const) {
    try {
      accessSync(tls[field], constants.R_OK);
    } catch (err) {
      problems.push(
        `gossip.tls.${field}: cannot read ${tls[field]}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  if (problems.length > 0) throw new ConfigError(config.file, problems);
  return { keyPath: tls.key, certPath: tls.cert, caPath: tls.ca };
}

/** The clock check's thresholds from the config: fractions of 2ε (DESIGN §1.2 "Checked"). */
export function clockCheckOptions(config: RegionConfig): ClockCheckOptions {
  const twoEpsUs = 2 * config.lease.epsilonMs * 1000;
  return {
    excludeAboveUs: config.gossip.clock.safeFraction * twoEpsUs,
    resumeAtOrBelowUs: config.gossip.clock.resumeFraction * twoEpsUs,
    maxSampleAgeUs: config.gossip.clock.maxSampleAgeMs * 1000,
  };
}

export function policyResolver(config: RegionConfig, loaded?: PolicySet): PolicyResolver {
  const ids = config.regions.map((r) => r.id);
  const policies = loaded ?? loadPolicies(config.policiesPath, ids);
  const cache = new Map<string, ReturnType<PolicyResolver["resolve"]>>();
  const intern = quotaInterner();
  // Keys come from Redis by their stored names: a policy naming a hashed key is found by its hash.
  const hashPart = keyPartHasher(config);
  return {
    resolve(tenant, resource) {
      const k = quotaKey(tenant, resource);
      const hit = cache.get(k);
      if (hit) return hit;
      const opts = { floorPpm: config.floorPpm, ...(hashPart !== undefined ? { names: { hashPart } } : {}) };
      const policy = resolvePolicy(policies, ids, config.region, tenant, resource, opts);
      const regions = intern(
        ids.map((id) => {
          const p = resolvePolicy(policies, ids, id, tenant, resource, opts);
          return { region: id, baseShare: p.baseShare, floorShare: p.floorShare };
        }),
      );
      const value = { policy, regions };
      if (cache.size > 100_000) cache.clear();
      cache.set(k, value);
      return value;
    },
  };
}

/** Starts the daemon for a loaded config; used by the CLI and by tests in-process. */
export async function startGossip(
  config: RegionConfig,
  options: {
    httpPort?: number;
    httpHost?: string;
    logger?: pino.Logger;
    /** See ListenOptions (limiter listen.ts): both listeners take a free port when theirs is taken. */
    anyPortIfTaken?: boolean;
  } = {},
): Promise<RunningGossip> {
  const log = options.logger ?? pino({ level: "silent" });
  const events = new ThrottledEvents(log);
  const tls = meshTls(config);
  const hashPart = keyPartHasher(config);
  const policies = loadPolicies(
    config.policiesPath,
    config.regions.map((r) => r.id),
  );
  const registry = new Registry();
  collectProcessMetrics(registry);
  const url = config.gossip.redisUrl ?? config.redis.url;
  // With redis.cluster the URL is one seed node; every script touches one slot.
  const redis = connectRedis(url, {
    cluster: config.redis.cluster,
    role: "daemon",
    onError: (err) =>
      events.emit(
        "warn",
        "redis_error",
        "connection",
        { op: "connection", error: err.message },
        "redis error",
      ),
  });
  // DESIGN §4: refuse an evicting Redis (or undeclared replicas) at start;
  // watch the primary's replication id (a failover to a replica that may have
  // missed writes puts the region into recovery); grants and returns leave
  // the region only once `redis.replicas` replicas hold them.
  let store: Awaited<ReturnType<typeof createRedisDaemonStore>>;
  // Setup drift found by the watcher (DESIGN §4 "Checked continuously"): one log line per change.
  let driftMetrics:
    | Pick<ReturnType<typeof createDaemonMetrics>, "setupDrift" | "setupDriftChanges">
    | undefined;
  const onDrift = (change: SetupDriftChange) => {
    driftMetrics?.setupDrift.set({ setting: change.setting }, change.drifting ? 1 : 0);
    if (change.drifting) driftMetrics?.setupDriftChanges.inc({ setting: change.setting });
    const fields = { event: change.drifting ? "redis_setup_drift" : "redis_setup_drift_ended" };
    if (change.drifting)
      log.error(
        { ...fields, setting: change.setting, rotatedShards: change.rotatedShards },
        `redis setup drift (${change.setting}): ${change.detail}; grants and returns held until it is fixed`,
      );
    else
      log.warn(
        { ...fields, setting: change.setting, rotatedShards: change.rotatedShards },
        `redis setup drift ended (${change.setting}): ${change.detail}`,
      );
  };
  try {
    // A Cluster client knows no node before it is ready (the setup check would pass vacuously).
    await waitReady(redis, 10_000);
    await checkRedisSetup(redis, { replicas: config.redis.replicas });
    store = await createRedisDaemonStore(redis, config, {
      primaryCheckMs: config.redis.primaryCheckMs,
      replicas: config.redis.replicas,
      onDrift,
      onError: (where, err) =>
        events.emit("warn", "daemon_error", where, { where, error: (err as Error).message }, "daemon error"),
    });
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const peers = config.regions.filter((r) => r.id !== config.region);
  let daemon: GossipDaemon | undefined;
  // Keys of the policies in force (replicated: every version being met), so a removed policy's series go.
  const metrics = createDaemonMetrics(registry, {
    exportKey: (key) =>
      rollout !== undefined
        ? (rollout.effectiveSets()?.some((s) => s.entries.has(key)) ?? false)
        : policies.entries.has(key),
    settings: SETUP_SETTINGS,
  });
  driftMetrics = metrics;
  for (const setting of store.drifting()) {
    metrics.setupDrift.set({ setting }, 1);
    metrics.setupDriftChanges.inc({ setting });
  }
  const ids = config.regions.map((r) => r.id);
  const snapshots = createCertifier(redis, { replicas: config.redis.replicas, timeoutMs: 100 });
  const certified: CertifiedWrite = async (place, write) =>
    (await snapshots.run(place, write)).durability.durable;
  const rollout = config.policy.replicated
    ? new RolloutStep(
        {
          region: config.region,
          regions: ids,
          limiterStaleMs: config.policy.limiterStaleMs,
          waitUs: (config.lease.loanDurationMs + 2 * config.lease.epsilonMs) * 1000,
          windowMarginUs: 2 * config.lease.epsilonMs * 1000,
          seedPolicies: () => readJsonFile(config.policiesPath),
          parse: (raw, label) => parsePolicies(raw, label, ids),
          now: () => performance.now(),
          log: (level, event, fields) => log[level]({ event, ...fields }, event.replaceAll("_", " ")),
        },
        {
          readSnapshotRaw: () => readSnapshotRaw(redis),
          // Certified like a loan (DESIGN §4): WAIT on the connection that wrote it, no reconnect
          // between; and not durable while a setting drifted (an extra replica the WAIT does not cover).
          writeSnapshot: async (raw) =>
            (await writeSnapshot(redis, raw, { replicas: config.redis.replicas, certified })) &&
            store.drifting().length === 0,
          popProposals: (max) => popProposals(redis, max),
          timeUs: async () => {
            const [s, us] = await redis.time();
            return Number(s) * 1_000_000 + Number(us);
          },
        },
      )
    : undefined;
  if (rollout !== undefined) {
    const version = (which: "target" | "completed") => () => {
      const st = rollout.status();
      return st[which]?.version ?? -1;
    };
    new Gauge({
      name: "geoquota_policy_target_version",
      help: "Newest known policy version (-1: policy unknown)",
      registers: [registry],
      collect() {
        this.set(version("target")());
      },
    });
    new Gauge({
      name: "geoquota_policy_completed_version",
      help: "Policy version this region completed (grew to; -1: policy unknown)",
      registers: [registry],
      collect() {
        this.set(version("completed")());
      },
    });
    new Gauge({
      name: "geoquota_policy_phase",
      help: "1 for the rollout phase this region is in (stable, rolling_out, waiting, unknown)",
      labelNames: ["phase"],
      registers: [registry],
      collect() {
        const phase = rollout.status().phase;
        for (const p of ["stable", "rolling_out", "waiting", "unknown"])
          this.set({ phase: p }, p === phase ? 1 : 0);
      },
    });
  }
  const peerUrl = (endpoint: string) => `${tls ? "wss" : "ws"}://${endpoint}`;
  const mesh = new Mesh(
    {
      self: config.region,
      listen: { ...config.gossip.listen, anyPortIfTaken: options.anyPortIfTaken === true },
      // A peer at port 0 is not known yet: setPeerAddress gives it later.
      peers: peers.map((p) =>
        p.gossip.endsWith(":0") ? { id: p.id } : { id: p.id, url: peerUrl(p.gossip) },
      ),
      secret: config.sharedSecret,
      ...(tls ? { tls } : {}),
      frameBytesMax: config.gossip.frameBytesMax,
      reconnect: config.gossip.reconnect,
      heartbeatMs: config.gossip.heartbeatMs,
    },
    {
      registry,
      handlers: {
        onFrame: (peer, bytes) => daemon?.onFrame(peer, bytes),
        onPeerUp: (peer) => {
          log.info({ event: "gossip_link_up", peer, tls: tls !== undefined }, "gossip link up");
          daemon?.peerUp(peer);
        },
        onPeerDown: (peer, reason) =>
          log.warn(
            { event: "gossip_link_down", peer, code: reason.code, by: reason.by, detail: reason.detail },
            "gossip link down",
          ),
        onHandshakeFailure: (peer, reason) =>
          events.emit(
            "warn",
            "gossip_handshake_failed",
            `${peer ?? "unknown"} ${reason.code}`,
            { peer: peer ?? null, code: reason.code, by: reason.by, detail: reason.detail },
            "gossip handshake failed",
          ),
      },
      logger: log,
    },
  );
  daemon = new GossipDaemon(
    {
      region: config.region,
      peers: peers.map((p) => p.id),
      round: config.gossip.round,
      reweighting: config.gossip.reweighting,
      ...(config.gossip.clock.check ? { clockCheck: clockCheckOptions(config) } : {}),
    },
    {
      store,
      link: mesh,
      policies:
        rollout !== undefined
          ? rolloutPolicyResolver(rollout, {
              region: config.region,
              regions: ids,
              floorPpm: config.floorPpm,
              ...(hashPart !== undefined ? { hashPart } : {}),
            })
          : policyResolver(config, policies),
      ...(rollout !== undefined ? { rollout } : {}),
      metrics,
      onClockChange: (c) => {
        const fields = {
          event: c.excluded ? "clock_peer_excluded" : "clock_peer_resumed",
          peer: c.peer,
          offsetUs: c.offsetUs === undefined ? null : Math.round(c.offsetUs),
          uncertaintyUs: c.uncertaintyUs === undefined ? null : Math.round(c.uncertaintyUs),
        };
        if (c.excluded)
          log.warn(fields, `clock check: ${c.peer} excluded from lending and borrowing (${c.reason})`);
        else log.info(fields, `clock check: ${c.peer} back in range (${c.reason})`);
      },
      // `where` is "<step> <key>": throttle per step, not per key.
      onError: (where, err) =>
        events.emit(
          "warn",
          "daemon_error",
          where.split(" ")[0] ?? where,
          { where, error: (err as Error).message },
          "daemon error",
        ),
    },
  );
  const recovery = watchRecovery(
    redis,
    config.lease,
    1000,
    (now, before) => {
      metrics.recovering.set(now.recovering ? 1 : 0);
      const fields = { shards: now.shards, untilUs: now.untilUs };
      if (now.recovering) log.warn({ event: "recovery_started", ...fields }, "region in recovery");
      else if (before !== undefined) log.info({ event: "recovery_ended" }, "region recovery ended");
    },
    (err) =>
      events.emit(
        "warn",
        "redis_error",
        "recovery",
        { op: "recovery", error: (err as Error).message },
        "redis error",
      ),
  );
  await mesh.start();
  daemon.start();
  // The region's limiters publish when a key starts being denied (RegionStore.wake): the next
  // round comes early. A subscriber connection of its own (a subscribed connection runs nothing
  // else); if it fails, rounds keep their timer.
  const wakes = isCluster(redis) ? redis.duplicate() : redis.duplicate();
  wakes.on("error", () => {}); // the main connection reports the Redis's errors
  wakes.on("message", () => daemon?.wake());
  wakes
    .subscribe(WAKE_CHANNEL)
    .catch((err: Error) =>
      events.emit("warn", "redis_error", "subscribe", { op: "subscribe", error: err.message }, "redis error"),
    );
  // First reading after one interval: startup is busy enough (and markers may not exist yet).
  const running = daemon;
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: string, type = "application/json") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (req.url === "/healthz") return send(200, '{"ok":true}');
    if (req.url === "/readyz") {
      const ready = redis.status === "ready";
      return send(ready ? 200 : 503, JSON.stringify({ ready }));
    }
    if (req.url === "/v1/status") {
      return send(200, JSON.stringify({ ...running.status(), links: mesh.peers() }));
    }
    if (req.url === "/metrics") {
      registry.metrics().then(
        (text) => send(200, text, registry.contentType),
        (err: Error) => send(500, JSON.stringify({ error: err.message })),
      );
      return;
    }
    send(404, '{"error":"not found"}');
  });
  const httpHost = options.httpHost ?? "127.0.0.1";
  let httpPort: number;
  try {
    httpPort = await listenServer(server, httpHost, options.httpPort ?? 0, {
      anyPortIfTaken: options.anyPortIfTaken === true,
    });
  } catch (err) {
    recovery.stop();
    wakes.disconnect();
    await running.stop();
    await mesh.stop();
    await store.close();
    redis.disconnect();
    throw err;
  }
  const reloadPolicies = async (): Promise<{ ok: boolean; message: string }> => {
    let raw: unknown;
    try {
      raw = readJsonFile(config.policiesPath);
      parsePolicies(raw, config.policiesPath, ids);
    } catch (err) {
      const message = `policies reload refused: ${(err as Error).message}`;
      log.error(
        { event: "policy_reload_refused", file: config.policiesPath, error: (err as Error).message },
        message,
      );
      return { ok: false, message };
    }
    if (rollout === undefined) {
      const message = "policies reload: policy.replicated is false; restart the processes to apply the file";
      log.warn({ event: "policy_reload_ignored" }, message);
      return { ok: false, message };
    }
    const proposalId = `sighup-${config.region}-${Date.now()}`;
    await pushProposal(redis, { proposalId, policies: raw, at: Date.now() });
    const message = `policies reload proposed as ${proposalId} (a new version unless it equals the target)`;
    log.info({ event: "policy_reload_proposed", proposalId }, message);
    return { ok: true, message };
  };
  return {
    daemon: running,
    mesh,
    httpPort,
    httpHost,
    rollout,
    reloadPolicies,
    setPeerAddress(peer, endpoint) {
      mesh.setPeerUrl(peer, peerUrl(endpoint));
    },
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      recovery.stop();
      wakes.disconnect();
      await running.stop();
      await mesh.stop();
      await store.close();
      redis.disconnect();
    },
  };
}

export interface RunGossipOptions {
  /**
   * Runs once the daemon serves (both listeners bound), e.g. to report
   * readiness and the real addresses (`running.mesh.port()`, `running.httpPort`).
   */
  onStarted?: (running: RunningGossip) => void;
  /** See startGossip: for a daemon whose starter reads its real addresses. */
  anyPortIfTaken?: boolean;
  /**
   * The starter hands over peers' addresses (`setPeerAddress`), so a peer at
   * port 0 in the config is allowed; without it such a peer could never be dialed.
   */
  peersFromStarter?: boolean;
}

/** The process entry: runs until SIGINT/SIGTERM. */
export async function runGossip(configPath: string, options: RunGossipOptions = {}): Promise<void> {
  const config = loadRegionConfig(configPath);
  if (options.peersFromStarter !== true) {
    const unknown = config.regions.flatMap((r, i) =>
      r.id !== config.region && r.gossip.endsWith(":0")
        ? [
            `regions[${i}].gossip: port 0 (address not known) is only for a daemon started by geoquota cluster`,
          ]
        : [],
    );
    if (unknown.length > 0) throw new ConfigError(config.file, unknown);
  }
  const log = pino({ name: `gossip:${config.region}`, level: logLevelOf(config.logLevel, process.env) });
  const http = config.gossip.http;
  const running = await startGossip(config, {
    logger: log,
    ...(http ? { httpPort: http.port, httpHost: http.host } : {}),
    ...(options.anyPortIfTaken !== undefined ? { anyPortIfTaken: options.anyPortIfTaken } : {}),
  });
  log.info({ port: running.mesh.port(), http: running.httpPort }, "gossip daemon started");
  options.onStarted?.(running);
  const onHup = () => {
    running
      .reloadPolicies()
      .catch((err: Error) =>
        log.error({ event: "policy_reload_failed", error: err.message }, "policies reload failed"),
      );
  };
  process.on("SIGHUP", onHup);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  process.off("SIGHUP", onHup);
  await running.close();
}
