// The only module that listens. `runRegion(configPath)` is what the CLI's
// `geoquota region --config F` calls; `startRegionService` is the same thing
// in-process for tests and the cluster orchestrator.
import {
  loadPolicies,
  loadRegionConfig,
  type PolicySet,
  type RegionConfig,
  logLevelOf,
  readJsonFile,
} from "@geoquota/config";
import type { FastifyInstance } from "fastify";
import { Cluster, Redis } from "ioredis";
import { Registry } from "prom-client";
import { RedisAuditLog } from "./admin-routes.js";
import { type AppConfig, buildApp } from "./app.js";
import { Limiter, type LimiterConfig } from "./limiter.js";
import { bindWithFallback, collectProcessMetrics } from "@geoquota/edge";
import { createSetupDriftMetrics, type SetupDriftMetrics } from "./metrics.js";
import { refuseWhileDrifting } from "./setup-drift.js";
import {
  checkRedisSetup,
  connectRegionRedis,
  createPrimaryWatcher,
  createRedisStore,
  initFreshRegion,
  type PrimaryWatcher,
  SETUP_SETTINGS,
  type SetupDriftChange,
  waitReady,
} from "@geoquota/redis";
import { pushProposal, seedSnapshot, snapshotReader } from "@geoquota/rollout";
import { monotonicNow } from "./clock.js";
import { documentOf, ReplicatedPolicies } from "./policy-source.js";
import type { RegionStore } from "@geoquota/core";

export interface RegionService {
  /** `http://host:port` the service listens on. */
  readonly url: string;
  readonly app: FastifyInstance;
  readonly limiter: Limiter;
  /** Stops listening, returns held leases, closes the store (and the Redis connection it opened). */
  close(): Promise<void>;
}

export interface StartRegionOptions {
  readonly config: LimiterConfig &
    AppConfig &
    Pick<RegionConfig, "listen" | "lease"> &
    Partial<Pick<RegionConfig, "policy">>;
  /** The policies file: the static policies, or (replicated) what the limiter uses until its first snapshot read. */
  readonly policies: PolicySet;
  /** The document `policies` was parsed from (GET /v1/policy in static mode). */
  readonly policiesDocument?: unknown;
  /** A ready store; when absent, one is built on `redis` or `config.redis.url`. */
  readonly store?: RegionStore;
  /** An ioredis connection (not closed by close()) or a URL (connection owned by the service). */
  readonly redis?: Redis | Cluster | string;
  /** Override `config.listen` (port 0 = any free port). */
  readonly host?: string;
  readonly port?: number;
  /** See ListenOptions (listen.ts): a taken port is replaced by a free one; read `url` for it. */
  readonly anyPortIfTaken?: boolean;
  /** Fastify/pino logger options; off by default. */
  readonly logger?: boolean | Record<string, unknown>;
  /** Log every request/response (config `logRequests`); off by default. */
  readonly logRequests?: boolean;
  /** Metrics registry; by default a fresh one with prom-client's process metrics. */
  readonly registry?: Registry;
  /**
   * The Redis provably never held geoquota state (a fresh demo/test cluster):
   * mark the incarnation as born at 0 so the region does not start in recovery.
   * Never set this for a Redis that may have lost state (DESIGN §4).
   */
  readonly fresh?: boolean;
}

export async function startRegionService(options: StartRegionOptions): Promise<RegionService> {
  const { config } = options;
  let ownedRedis: Redis | Cluster | undefined;
  let store = options.store;
  let ping: (() => Promise<unknown>) | undefined;
  let watcher: PrimaryWatcher | undefined;
  let redis: Redis | Cluster | undefined;
  // Drift found before the app (its logger, its registry) exists is reported once they do.
  let driftMetrics: SetupDriftMetrics | undefined;
  let driftLog: ((change: SetupDriftChange) => void) | undefined;
  const reportDrift = (change: SetupDriftChange) => {
    driftMetrics?.drifting.set({ setting: change.setting }, change.drifting ? 1 : 0);
    if (change.drifting) driftMetrics?.changes.inc({ setting: change.setting });
    driftLog?.(change);
  };
  if (options.redis instanceof Redis || options.redis instanceof Cluster) redis = options.redis;
  if (store === undefined) {
    if (redis === undefined) {
      const url = typeof options.redis === "string" ? options.redis : config.redis.url;
      ownedRedis = connectRegionRedis(url, config.redis.cluster);
      redis = ownedRedis;
    }
    const r = redis;
    ping = () => r.ping();
    // DESIGN §4, before serving: an evicting Redis (or undeclared replicas)
    // is refused; the primary's replication id is checked now and then every
    // redis.primaryCheckMs by this process itself (a failover puts the region
    // into recovery even while no gossip daemon runs), and so are the start
    // checks: drift rotates the markers (eviction) and fails closed.
    try {
      await waitReady(redis, 5000);
      await checkRedisSetup(redis, { replicas: config.redis.replicas });
      if (options.fresh === true) {
        await initFreshRegion(redis);
        // A brand-new Redis of a replicated region: its policies start as the seed version
        // (what the orchestrator does too), so the limiter need not wait for a daemon.
        if (config.policy?.replicated === true)
          await seedSnapshot(redis, options.policiesDocument ?? documentOf(options.policies), {
            region: config.region,
            regions: config.regions.map((x) => x.id),
          });
      }
      watcher = createPrimaryWatcher(redis, {
        replicas: config.redis.replicas,
        onDrift: (change) => reportDrift(change),
      });
      await watcher.check();
    } catch (err) {
      ownedRedis?.disconnect();
      throw err;
    }
    store = createRedisStore({
      redis,
      region: config.region,
      timing: {
        epsilonUs: config.lease.epsilonMs * 1000,
        loanDurationUs: config.lease.loanDurationMs * 1000,
        leasedMode: config.leased.enabled,
      },
      ...(config.redis.durableAdmissions
        ? { durability: { replicas: config.redis.replicas, timeoutMs: config.redis.timeoutMs } }
        : {}),
      ...(config.redis.batch !== undefined ? { batch: config.redis.batch } : {}),
    });
    const w = watcher;
    if (w !== undefined) store = refuseWhileDrifting(store, () => w.drifting());
  }
  let registry = options.registry;
  if (registry === undefined) {
    registry = new Registry();
    collectProcessMetrics(registry);
  }
  if (watcher !== undefined) {
    driftMetrics = createSetupDriftMetrics(registry, SETUP_SETTINGS);
    for (const setting of watcher.drifting()) {
      driftMetrics.drifting.set({ setting }, 1);
      driftMetrics.changes.inc({ setting });
    }
  }
  // Replicated policies (docs/design.md §3.4): the region's gossip daemon writes
  // them to Redis; this limiter polls them and decides nothing before the first read.
  const replicated = config.policy?.replicated === true;
  if (replicated && redis === undefined) {
    throw new Error("replicated policies need the region's Redis (pass redis, not only a store)");
  }
  const policyRedis = redis;
  let firstRead: Promise<void> | undefined;
  const limiter = new Limiter({
    store,
    config,
    policies: options.policies,
    metrics: registry,
    ...(ping !== undefined ? { ping } : {}),
  });
  const app = await buildApp(limiter, {
    config,
    ...(options.policiesDocument !== undefined ? { policiesDocument: options.policiesDocument } : {}),
    ...(replicated && policyRedis !== undefined && config.policy !== undefined
      ? {
          policyAdmin: (target: Limiter, fastify: FastifyInstance) => {
            const readSnapshot = snapshotReader(policyRedis);
            const source = new ReplicatedPolicies({
              region: config.region,
              regionIds: target.regions,
              staleMs: config.policy!.limiterStaleMs,
              read: async () => {
                const r = await readSnapshot();
                if (r === null) return null;
                if (!r.ok) throw new Error(r.error);
                return r.value;
              },
              push: (p) => pushProposal(policyRedis, p),
              target,
              now: monotonicNow,
              onEvent: (event, detail) =>
                event === "policy_version"
                  ? fastify.log.info({ event, ...detail }, "policy version")
                  : fastify.log.warn({ event, ...detail }, "policy snapshot not usable"),
            });
            firstRead = source.start();
            return source;
          },
        }
      : {}),
    ...(redis !== undefined ? { audit: new RedisAuditLog(redis) } : {}),
    ...(options.logRequests !== undefined ? { logRequests: options.logRequests } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
  });
  // Serve only once the first snapshot read answered (a read that finds none leaves it unknown).
  await firstRead?.catch(() => {});
  const host = options.host ?? config.listen.host;
  const port = options.port ?? config.listen.port;
  try {
    await bindWithFallback(port, (p) => app.listen({ host, port: p }), {
      anyPortIfTaken: options.anyPortIfTaken === true,
    });
  } catch (err) {
    await app.close();
    ownedRedis?.disconnect();
    throw err;
  }
  driftLog = (change) =>
    change.drifting
      ? app.log.error(
          { event: "redis_setup_drift", setting: change.setting, rotatedShards: change.rotatedShards },
          `redis setup drift (${change.setting}): ${change.detail}; admissions refused until it is fixed`,
        )
      : app.log.warn(
          { event: "redis_setup_drift_ended", setting: change.setting, rotatedShards: change.rotatedShards },
          `redis setup drift ended (${change.setting}): ${change.detail}`,
        );
  for (const setting of watcher?.drifting() ?? [])
    app.log.error({ event: "redis_setup_drift", setting }, `redis setup drift (${setting}) at start`);
  watcher?.start(config.redis.primaryCheckMs, (err) =>
    app.log.warn({ err: (err as Error).message }, "primary check failed"),
  );
  const address = app.server.address();
  const boundPort = typeof address === "object" && address !== null ? address.port : port;
  const shownHost = host.includes(":") ? `[${host}]` : host;
  const finalStore = store;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${boundPort}`,
    app,
    limiter,
    close() {
      closing ??= (async () => {
        watcher?.stop();
        await app.close();
        await finalStore.close();
        if (ownedRedis !== undefined) {
          await ownedRedis.quit().catch(() => ownedRedis?.disconnect());
        }
      })();
      return closing;
    },
  };
}

export interface RunRegionOptions {
  /** Close on SIGINT/SIGTERM (default true). */
  readonly handleSignals?: boolean;
  readonly logger?: boolean | Record<string, unknown>;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** See StartRegionOptions.fresh: only for a Redis that never held geoquota state. */
  readonly fresh?: boolean;
  /** See StartRegionOptions.anyPortIfTaken. */
  readonly anyPortIfTaken?: boolean;
}

/** Loads `regions/<id>.json` and its policies file, connects the region's Redis, listens. */
export async function runRegion(configPath: string, options: RunRegionOptions = {}): Promise<RegionService> {
  const env = options.env ?? process.env;
  const config = loadRegionConfig(configPath, env);
  const policies = loadPolicies(
    config.policiesPath,
    config.regions.map((r) => r.id),
  );
  const service = await startRegionService({
    config,
    policies,
    policiesDocument: readJsonFile(config.policiesPath),
    logger: options.logger ?? { level: logLevelOf(config.logLevel, env), base: { region: config.region } },
    logRequests: config.logRequests,
    ...(options.fresh !== undefined ? { fresh: options.fresh } : {}),
    ...(options.anyPortIfTaken !== undefined ? { anyPortIfTaken: options.anyPortIfTaken } : {}),
  });
  if (options.handleSignals ?? true) {
    const stop = () => {
      void service.close().then(() => process.exit(0));
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  }
  return service;
}
