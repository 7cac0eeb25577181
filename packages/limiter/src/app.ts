// The region's HTTP service (DESIGN §8). Built by buildApp(deps) and tested
// with app.inject(); only main.ts listens.
import { createHash, timingSafeEqual } from "node:crypto";
import { type PolicySet, parsePolicySpec, type RegionConfig, withPolicy } from "@geoquota/config";
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import { Registry } from "prom-client";
import type { MonotonicClock } from "./clock.js";
import { ERRORS, errorBody, LimiterError } from "./errors.js";
import { decisionBody, rateLimitHeaders } from "./headers.js";
import { validateKeyPart } from "./key-hygiene.js";
import { Limiter } from "./limiter.js";
import { ThrottledEvents } from "./log-events.js";
import { breakerStateValue, createMetrics, OTHER_RESOURCE } from "./metrics.js";
import { geoquotaRateLimit } from "./plugin.js";
import type { RegionStore } from "./types.js";
import { CompoundCheckSchema, parseBody, SingleCheckSchema } from "./validation.js";

export type AppConfig = Pick<
  RegionConfig,
  | "region"
  | "regions"
  | "redis"
  | "breaker"
  | "failMode"
  | "leased"
  | "floorPpm"
  | "keyMaxLength"
  | "adminToken"
> & { readonly keyHashSecret?: string };

export interface AppDeps {
  readonly store: RegionStore;
  readonly config: AppConfig;
  readonly policies: PolicySet;
  /** Metrics registry; a fresh one by default (tests build many apps). */
  readonly registry?: Registry;
  readonly clock?: MonotonicClock;
  /** Readiness probe for /readyz (main passes Redis PING); default: the store's ping, else inspect. */
  readonly ping?: () => Promise<unknown>;
  /** Fastify logger option; off by default (tests fail on stray output). main.ts passes pino options. */
  readonly logger?: boolean | Record<string, unknown>;
  /** Log every request and response (two lines per check): off by default, the check route is the hot path. */
  readonly logRequests?: boolean;
}

declare module "fastify" {
  interface FastifyInstance {
    limiter: Limiter;
  }
}

export const BODY_BYTES_MAX = 64 * 1024;

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Maps Fastify's own errors (bad JSON, body too large) into the catalog. */
function toLimiterError(err: FastifyError): LimiterError {
  if (err instanceof LimiterError) return err;
  if (err.statusCode === 413) return new LimiterError("GQ_ERR_PAYLOAD_TOO_LARGE");
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return new LimiterError("GQ_ERR_INVALID_BODY", `body: ${err.message}`, { field: "body" });
  }
  return new LimiterError("GQ_ERR_INTERNAL", ERRORS.GQ_ERR_INTERNAL.message, { cause: err });
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const registry = deps.registry ?? new Registry();
  // Late-bound: the limiter (and its policies) and the logger exist only below.
  let limiterRef: Limiter | undefined;
  let events: ThrottledEvents | undefined;
  const metrics = createMetrics(registry, {
    resourceLabel: (r) =>
      limiterRef !== undefined && configuredResources(limiterRef.policies).has(r) ? r : OTHER_RESOURCE,
  });
  metrics.breakerState.set(0);
  const limiter = new Limiter({
    store: deps.store,
    config: deps.config,
    policies: deps.policies,
    metrics,
    ...(deps.clock !== undefined ? { clock: deps.clock } : {}),
    ...(deps.ping !== undefined ? { ping: deps.ping } : {}),
    onStoreError: (op, kind, err) =>
      events?.emit(
        "warn",
        "redis_error",
        `${op}:${kind}`,
        { op, errorKind: kind, ...(err instanceof Error ? { error: err.message } : {}) },
        "redis call failed",
      ),
  });
  limiterRef = limiter;
  const app = Fastify({
    logger: deps.logger ?? false,
    bodyLimit: BODY_BYTES_MAX,
    logController: new LogController({ disableRequestLogging: deps.logRequests !== true }),
  });
  events = new ThrottledEvents(app.log, 1000, deps.clock);
  let breakerWas = limiter.breaker.state;
  limiter.breaker.onStateChange((s) => {
    const from = breakerWas;
    breakerWas = s;
    const fields = { event: "breaker_state", from, to: s };
    if (s === "open") app.log.warn(fields, "redis breaker opened");
    else app.log.info(fields, `redis breaker ${s === "closed" ? "closed" : "half-open"}`);
  });
  app.decorate("limiter", limiter);
  // Leases held by this process go back to the bucket on shutdown; the store is the caller's.
  app.addHook("onClose", async () => {
    await limiter.leases.close();
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const e = toLimiterError(err);
    if (e.statusCode >= 500) {
      const route = req.routeOptions.url ?? "(no route)";
      events?.emit(
        "error",
        "http_5xx",
        `${e.statusCode} ${e.code} ${req.method} ${route}`,
        { status: e.statusCode, code: e.code, method: req.method, route, err: e.cause ?? err },
        "5xx response",
      );
    }
    return reply.code(e.statusCode).send(errorBody(e));
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new LimiterError("GQ_ERR_NOT_FOUND", `no route ${req.method} ${req.url}`);
    return reply.code(404).send(errorBody(e));
  });

  const adminDigest = digest(deps.config.adminToken);
  const requireAdmin = async (req: FastifyRequest): Promise<void> => {
    const h = req.headers.authorization;
    const token = typeof h === "string" && h.startsWith("Bearer ") ? h.slice(7) : undefined;
    // Compare digests: constant time, and no length leak.
    if (token === undefined || !timingSafeEqual(digest(token), adminDigest)) {
      throw new LimiterError("GQ_ERR_UNAUTHORIZED");
    }
  };

  app.post("/v1/check", async (req, reply) => {
    const body = req.body as Record<string, unknown> | undefined;
    if (body !== null && typeof body === "object" && "limits" in body) {
      const c = parseBody(CompoundCheckSchema, body);
      const r = await limiter.checkCompound(c.limits);
      // Headers follow the binding limit: the failed one, else the one with least remaining.
      const bindingIndex =
        r.failedIndex >= 0
          ? r.failedIndex
          : r.parts.reduce((best, p, i) => (p.remaining < r.parts[best]!.remaining ? i : best), 0);
      const binding = r.parts[bindingIndex]!;
      reply.headers(rateLimitHeaders({ ...binding, allowed: r.allowed, degraded: r.degraded }));
      return reply.code(r.allowed ? 200 : 429).send({
        ...decisionBody(binding),
        allowed: r.allowed,
        degraded: r.degraded,
        failedIndex: r.failedIndex,
        parts: r.parts.map((p, i) => ({
          tenant: c.limits[i]!.tenant,
          resource: c.limits[i]!.resource,
          ...decisionBody(p),
        })),
      });
    }
    const b = parseBody(SingleCheckSchema, body);
    const r = await limiter.check(b.tenant, b.resource, b.cost);
    reply.headers(rateLimitHeaders(r));
    return reply.code(r.allowed ? 200 : 429).send(decisionBody(r));
  });

  app.post("/v1/refund", async (req, reply) => {
    const b = parseBody(SingleCheckSchema, req.body);
    const r = await limiter.refund(b.tenant, b.resource, b.cost);
    return reply.send({ refunded: b.cost, ...decisionBody(r), allowed: true });
  });

  app.get<{ Params: { tenant: string; resource: string } }>("/v1/quotas/:tenant/:resource", async (req) => {
    const { tenant, resource } = req.params;
    const { policy, view } = await limiter.inspect(tenant, resource);
    const regions = limiter.regionShares(tenant, resource);
    return {
      tenant,
      resource,
      region: limiter.region,
      key: policy.tenant === tenant ? undefined : policy.tenant,
      policy: {
        ...limiter.spec(tenant, resource),
        baseShare: policy.baseShare,
        floorShare: policy.floorShare,
      },
      share: view.share,
      recovering: view.recovering,
      tokens: view.tokens,
      nowUs: view.nowUs,
      regions,
      knownShares: knownShares(limiter.region, regions, view),
      counters: view.counters,
      loans: { out: view.loansOut, in: view.loansIn },
      breaker: limiter.breaker.state,
    };
  });

  app.get("/v1/policies", { preHandler: requireAdmin }, async () => {
    const p = limiter.policies;
    return {
      default: p.default,
      policies: [...p.entries].map(([k, spec]) => {
        const [tenant, resource] = k.split("|");
        return { tenant, resource, ...spec };
      }),
    };
  });

  app.put<{ Params: { tenant: string; resource: string } }>(
    "/v1/policies/:tenant/:resource",
    { preHandler: requireAdmin },
    async (req) => {
      const { tenant, resource } = req.params;
      if (tenant !== "*") validateKeyPart("tenant", tenant, deps.config.keyMaxLength);
      validateKeyPart("resource", resource, deps.config.keyMaxLength);
      if (req.body !== null && typeof req.body === "object" && "weights" in req.body) {
        // Base shares must agree across regions (Σ b_i ≤ U): one region's PUT cannot change them.
        throw new LimiterError(
          "GQ_ERR_INVALID_POLICY",
          "weights: change weights in policies.json of every region together, not through one region's API",
          { field: "weights" },
        );
      }
      const r = parsePolicySpec(req.body, limiter.regions);
      if (!r.ok) {
        const first = r.issues[0] ?? "body: invalid";
        throw new LimiterError("GQ_ERR_INVALID_POLICY", first, { field: first.slice(0, first.indexOf(":")) });
      }
      limiter.setPolicies(withPolicy(limiter.policies, tenant, resource, r.spec));
      app.log.info({ event: "policy_changed", tenant, resource, spec: r.spec }, "policy changed");
      return { tenant, resource, ...r.spec };
    },
  );

  app.get("/metrics", async (_req, reply) => {
    metrics.breakerState.set(breakerStateValue(limiter.breaker.state));
    return reply.header("content-type", registry.contentType).send(await registry.metrics());
  });

  app.get("/healthz", async () => ({ status: "ok", region: limiter.region }));

  app.get("/readyz", async (_req, reply: FastifyReply) => {
    const ok = await limiter.ready();
    if (!ok) {
      const e = new LimiterError("GQ_ERR_STORE_UNAVAILABLE");
      events?.emit(
        "warn",
        "http_5xx",
        "503 readyz",
        { status: 503, code: e.code, route: "/readyz" },
        "not ready",
      );
      return reply.code(503).send({ ...errorBody(e), status: "not_ready", region: limiter.region });
    }
    return { status: "ready", region: limiter.region, breaker: limiter.breaker.state };
  });

  // The seed's protected route, as the example of the plugin on a user route.
  await app.register(geoquotaRateLimit, { limiter });
  app.post(
    "/v1/payments/checkout",
    {
      config: {
        rateLimit: { resource: "payments_checkout", key: { header: "x-tenant-id", fallback: "anonymous" } },
      },
    },
    async (req) => {
      const tenant = req.headers["x-tenant-id"] ?? "anonymous";
      return { status: "accepted", tenant, region: limiter.region };
    },
  );

  return app;
}

const resourcesOf = new WeakMap<PolicySet, ReadonlySet<string>>();

/** Resources named by a configured policy (the only values the `resource` metric label takes). */
function configuredResources(p: PolicySet): ReadonlySet<string> {
  let set = resourcesOf.get(p);
  if (set === undefined) {
    set = new Set([...p.entries.keys()].map((k) => k.slice(k.indexOf("|") + 1)));
    resourcesOf.set(p, set);
  }
  return set;
}

/**
 * This region's view of every region's current share for the key: base share
 * adjusted by the loans this region knows of (its own grants and receipts).
 * Other regions' loans among themselves are not visible here.
 */
function knownShares(
  self: string,
  regions: readonly { id: string; baseShare: number }[],
  view: {
    share: number;
    loansOut: readonly { borrower: string; units: number }[];
    loansIn: readonly { lender: string; units: number }[];
  },
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of regions) out[r.id] = r.baseShare;
  for (const l of view.loansOut) if (out[l.borrower] !== undefined) out[l.borrower]! += l.units;
  for (const l of view.loansIn) if (out[l.lender] !== undefined) out[l.lender]! -= l.units;
  out[self] = view.share;
  return out;
}
