// The region's HTTP service (DESIGN §8). Built by buildApp(limiter, options)
// over a Limiter its caller built (fastify's buildApp + inject: the tests build
// the limiter, then the app, and inject); only main.ts listens.
import { createHash, timingSafeEqual } from "node:crypto";
import { type RegionConfig, ThrottledEvents } from "@geoquota/config";
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import { Registry } from "prom-client";
import { ERRORS, errorBody, LimiterError } from "./errors.js";
import { decisionNumbers } from "./decision-numbers.js";
import { DECISION_HEADER_NAMES, decisionBody, type HeaderOptions, rateLimitHeaders } from "./headers.js";
import { PROBLEM_JSON, prefersProblem, problemOf, quotaExceeded } from "./problem.js";
import type { CheckResult, Limiter } from "./limiter.js";
import { documentOf, type PolicyAdmin, StaticPolicies } from "./policy-source.js";
import { registerPolicyRoutes } from "./policy-routes.js";
import { registerAuthRoute } from "./auth-route.js";
import { type AuditLog, auditAdminRoutes, MemoryAuditLog, registerAdminRoutes } from "./admin-routes.js";
import {
  collectRoutes,
  openApiDocument,
  type RouteDoc,
  withParser,
  zodValidatorCompiler,
} from "./openapi.js";
import {
  CheckBodySchema,
  CheckResponseSchema,
  type CompoundCheck,
  ErrorSchema,
  HealthSchema,
  NotReadySchema,
  PolicyListSchema,
  RefundSchema,
  parseBody,
  parseCheckBody,
  QuotaViewSchema,
  ReadySchema,
  type SingleCheck,
} from "./validation.js";

/** What the HTTP layer reads of a region config (the engine's part is the Limiter's). */
export type AppConfig = Pick<RegionConfig, "adminToken"> &
  Partial<Pick<RegionConfig, "deniedStatus" | "partitionKey">>;

export interface AppOptions {
  readonly config: AppConfig;
  /**
   * Where policy changes go (docs/design.md §3.4): main passes the replicated
   * source of a multi-region config; default: this process only (static).
   */
  readonly policyAdmin?: (limiter: Limiter, app: FastifyInstance) => PolicyAdmin;
  /** The policies document `policies` was parsed from (static mode; default: rebuilt from the set). */
  readonly policiesDocument?: unknown;
  /** Fastify logger option; off by default (tests fail on stray output). main.ts passes pino options. */
  readonly logger?: boolean | Record<string, unknown>;
  /** Where admin changes are recorded (main: the region's Redis); default: in this process. */
  readonly audit?: AuditLog;
  /** Log every request and response (two lines per check): off by default, the check route is the hot path. */
  readonly logRequests?: boolean;
}

declare module "fastify" {
  interface FastifyInstance {
    limiter: Limiter;
  }
}

export const BODY_BYTES_MAX = 64 * 1024;
/** A path parameter (tenant, resource) of 128 characters, each up to 4 UTF-8 bytes as %XX. */
const PARAM_CHARS_MAX = 128 * 12;

const badRequest = { description: "invalid input; `field` names it", schema: ErrorSchema };
const unauthorized = { description: "missing or wrong bearer token", schema: ErrorSchema };

const CHECK_DOC: RouteDoc = {
  summary: "Decide and charge one limit, or several all-or-nothing",
  description:
    "Single form `{tenant, resource, cost?}`, or compound `{limits: [...]}`. Denied: 429, or 200 with " +
    "`allowed: false` when the region config says `deniedStatus: 200`. A deny-listed key: 403 " +
    "(`reason: deny_list`, no RateLimit headers). An allow-listed key: 200 (`reason: allow_list`) " +
    "without touching the store. Shadow policies: 200, `wouldDeny` tells the policy's own verdict. " +
    "With `Accept: application/problem+json`, a 429 is the ratelimit draft's quota-exceeded problem " +
    "(RFC 9457) and errors are about:blank problems.",
  tags: ["limits"],
  responses: {
    200: {
      description: "allowed (or denied, with deniedStatus 200)",
      schema: CheckResponseSchema,
      headers: DECISION_HEADER_NAMES,
    },
    400: badRequest,
    403: { description: "the key is on the deny list (`reason: deny_list`)", schema: CheckResponseSchema },
    415: { description: "the body is not application/json", schema: ErrorSchema },
    429: {
      description: "denied",
      schema: CheckResponseSchema,
      headers: [...DECISION_HEADER_NAMES, "Retry-After"],
    },
  },
};

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Maps Fastify's own errors (bad JSON, body too large, wrong content type) into the catalog. */
function toLimiterError(err: FastifyError): LimiterError {
  if (err instanceof LimiterError) return err;
  if (err.statusCode === 413) return new LimiterError("GQ_ERR_PAYLOAD_TOO_LARGE");
  if (err.statusCode === 415)
    return new LimiterError("GQ_ERR_UNSUPPORTED_MEDIA_TYPE", `body: ${err.message}`, { field: "body" });
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return new LimiterError("GQ_ERR_INVALID_BODY", `body: ${err.message}`, { field: "body" });
  }
  return new LimiterError("GQ_ERR_INTERNAL", ERRORS.GQ_ERR_INTERNAL.message, { cause: err });
}

/**
 * The HTTP service over `limiter` (built by the caller: its store, policies, clock, probe
 * and metrics registry are the limiter's). /metrics serves the limiter's registry (empty
 * when it keeps none). Closing the app returns the leases this process holds; the
 * limiter's store stays the caller's to close.
 */
export async function buildApp(limiter: Limiter, options: AppOptions): Promise<FastifyInstance> {
  const registry = limiter.registry ?? new Registry();
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: BODY_BYTES_MAX,
    logController: new LogController({ disableRequestLogging: options.logRequests !== true }),
    // Keys of keyMaxLength (≤ 128) characters, URL-encoded (≤ 12 bytes each): not a 414.
    routerOptions: { maxParamLength: PARAM_CHARS_MAX },
  });
  const events = new ThrottledEvents(app.log, 1000, limiter.clock);
  const stopStoreErrors = limiter.onStoreError((op, kind, err) =>
    events.emit(
      "warn",
      "redis_error",
      `${op}:${kind}`,
      { op, errorKind: kind, ...(err instanceof Error ? { error: err.message } : {}) },
      "redis call failed",
    ),
  );
  let breakerWas = limiter.breaker.state;
  const stopBreakerLog = limiter.breaker.onStateChange((s) => {
    const from = breakerWas;
    breakerWas = s;
    const fields = { event: "breaker_state", from, to: s };
    if (s === "open") app.log.warn(fields, "redis breaker opened");
    else app.log.info(fields, `redis breaker ${s === "closed" ? "closed" : "half-open"}`);
  });
  app.decorate("limiter", limiter);
  // Every route takes JSON: a text/plain body is a 415 (Fastify's error), not a string for the schema to refuse.
  app.removeContentTypeParser("text/plain");
  app.setValidatorCompiler(zodValidatorCompiler);
  // Before any route: /openapi.json lists exactly what is registered.
  const routes = collectRoutes(app);
  // Method and path pattern of every route: a known path with another method is a 405, not a 404.
  const routeMethods: { pattern: RegExp; methods: readonly string[] }[] = [];
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const pattern = new RegExp(
      `^${route.url.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z0-9_]+/g, "[^/]+")}/?$`,
    );
    routeMethods.push({ pattern, methods });
  });
  const headerOptions: HeaderOptions = {
    partitionKey: options.config.partitionKey ?? "hash",
    partitionKeySecret: limiter.partitionKeySecret,
  };
  /** An error or a non-decision body: problem details when the client asked for them (RFC 9457). */
  const sendError = (req: FastifyRequest, reply: FastifyReply, e: LimiterError, extra = {}) =>
    prefersProblem(req.headers.accept)
      ? reply.code(e.statusCode).type(PROBLEM_JSON).send(problemOf(e, extra))
      : reply.code(e.statusCode).send({ ...errorBody(e), ...extra });
  /** A denial's body: the decision JSON, or the draft's quota-exceeded problem when asked for. */
  const sendDenied = (req: FastifyRequest, reply: FastifyReply, r: CheckResult, body: object) => {
    if (deniedStatus !== 429 || !prefersProblem(req.headers.accept))
      return reply.code(deniedStatus).send(body);
    return reply
      .code(429)
      .type(PROBLEM_JSON)
      .send(quotaExceeded([r.scope], `quota exceeded for this key's ${r.scope} policy`, body));
  };
  const deniedStatus = options.config.deniedStatus ?? 429;
  // Leases held by this process go back to the bucket on shutdown; the store is the caller's.
  const policyAdmin =
    options.policyAdmin?.(limiter, app) ??
    new StaticPolicies(
      limiter.region,
      limiter.regions,
      options.policiesDocument ?? documentOf(limiter.policyVersions[limiter.policyVersions.length - 1]),
      limiter,
    );
  app.addHook("onClose", async () => {
    // The limiter may outlive this app (its caller's): it stops telling this app's log.
    stopStoreErrors();
    stopBreakerLog();
    policyAdmin.stop();
    await limiter.leases.close();
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const e = toLimiterError(err);
    if (e.statusCode >= 500) {
      const route = req.routeOptions.url ?? "(no route)";
      events.emit(
        "error",
        "http_5xx",
        `${e.statusCode} ${e.code} ${req.method} ${route}`,
        { status: e.statusCode, code: e.code, method: req.method, route, err: e.cause ?? err },
        "5xx response",
      );
    }
    return sendError(req, reply, e);
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? req.url;
    const allow = [
      ...new Set(routeMethods.filter((r) => r.pattern.test(path)).flatMap((r) => r.methods)),
    ].sort();
    if (allow.length > 0) {
      const e = new LimiterError(
        "GQ_ERR_METHOD_NOT_ALLOWED",
        `${req.method} ${path}: allowed ${allow.join(", ")}`,
      );
      return sendError(req, reply.header("allow", allow.join(", ")), e);
    }
    const e = new LimiterError("GQ_ERR_NOT_FOUND", `no route ${req.method} ${req.url}`);
    return sendError(req, reply, e);
  });

  /** A deny-listed key: 403, the decision as its body (problem details with its code when asked for). */
  const denyListedReply = (req: FastifyRequest, reply: FastifyReply, body: object) =>
    prefersProblem(req.headers.accept)
      ? sendError(req, reply, new LimiterError("GQ_ERR_DENY_LISTED"), body)
      : reply.code(403).send(body);

  const adminDigest = digest(options.config.adminToken);
  const checkAdminToken = async (req: FastifyRequest): Promise<void> => {
    const h = req.headers.authorization;
    const token = typeof h === "string" && h.startsWith("Bearer ") ? h.slice(7) : undefined;
    // Compare digests: constant time, and no length leak.
    if (token === undefined || !timingSafeEqual(digest(token), adminDigest)) {
      throw new LimiterError("GQ_ERR_UNAUTHORIZED");
    }
  };
  // Every admin route takes this guard: it also audits each change (admin-routes.ts).
  const audit = options.audit ?? new MemoryAuditLog();
  const requireAdmin = auditAdminRoutes(app, {
    region: limiter.region,
    admin: () => policyAdmin,
    audit,
    requireAdmin: checkAdminToken,
  });

  app.post(
    "/v1/check",
    { schema: { body: withParser(CheckBodySchema, parseCheckBody) }, config: { openapi: CHECK_DOC } },
    async (req, reply) => {
      const body = req.body as SingleCheck | CompoundCheck;
      if ("limits" in body) {
        const c = body;
        // Cost 0 = check only: charges nothing, needs one unit left.
        const r = await limiter.checkCompound(c.limits.map((l) => (l.cost === 0 ? { ...l, need: 1 } : l)));
        // Headers follow the binding limit: the failed one, else the one with least remaining
        // among those the store decided (an allow-listed limit binds only if all are).
        const limited = r.parts.flatMap((p, i) => (p.reason === "allow_list" ? [] : [i]));
        const bindingIndex =
          r.failedIndex >= 0
            ? r.failedIndex
            : (limited.length > 0 ? limited : [0]).reduce((best, i) =>
                r.parts[i]!.remaining < r.parts[best]!.remaining ? i : best,
              );
        const binding = r.parts[bindingIndex]!;
        const denyListed = binding.reason === "deny_list";
        // The check's verdict with the binding limit's numbers, for the headers and the body.
        const bound = { ...binding, allowed: r.allowed, degraded: r.degraded };
        const n = decisionNumbers(bound);
        // A deny list is not a rate limit: no RateLimit headers, no Retry-After.
        if (!denyListed) reply.headers(rateLimitHeaders(bound, headerOptions, n));
        const shadowParts = r.parts.filter((p) => p.wouldDeny !== undefined);
        // Receipts are the parts' own (one per charged limit), never the check's.
        const { refundReceipt: _bindingReceipt, ...top } = decisionBody(bound, n);
        const compound = {
          ...top,
          ...(shadowParts.length > 0 ? { wouldDeny: shadowParts.some((p) => p.wouldDeny === true) } : {}),
          failedIndex: r.failedIndex,
          parts: r.parts.map((p, i) => ({
            tenant: c.limits[i]!.tenant,
            resource: c.limits[i]!.resource,
            ...decisionBody(p),
          })),
        };
        if (r.allowed) return reply.code(200).send(compound);
        if (denyListed) return denyListedReply(req, reply, compound);
        return sendDenied(req, reply, binding, compound);
      }
      const r = await limiter.check(body.tenant, body.resource, body.cost);
      if (r.reason === "deny_list") return denyListedReply(req, reply, decisionBody(r));
      // The numbers once, for the headers and the body (decision-numbers.ts).
      const n = decisionNumbers(r);
      reply.headers(rateLimitHeaders(r, headerOptions, n));
      const single = decisionBody(r, n);
      return r.allowed ? reply.code(200).send(single) : sendDenied(req, reply, r, single);
    },
  );

  // The same single check for nginx auth_request, answered by status (auth-route.ts).
  registerAuthRoute(app, { limiter, headerOptions, sendError });

  // Refunds need the receipt of an allowed check (DESIGN §7; packages/limiter/README.md).
  app.post("/v1/refund", { schema: { body: withParser(RefundSchema, (d) => d) } }, async (req, reply) => {
    const b = parseBody(RefundSchema, req.body);
    const r = await limiter.refund(b.tenant, b.resource, b.receipt, b.cost);
    return reply.send({ refunded: r.refunded, ...decisionBody(r), allowed: true });
  });

  const quotaDoc: RouteDoc = {
    summary: "This region's view of one key",
    description: "`tenant` and `resource` as sent to /v1/check (URL-encoded); hashed keys are found too.",
    tags: ["limits"],
    responses: { 200: { description: "the view", schema: QuotaViewSchema }, 400: badRequest },
  };
  app.get<{ Params: { tenant: string; resource: string } }>(
    "/v1/quotas/:tenant/:resource",
    { config: { openapi: quotaDoc } },
    async (req) => {
      const { tenant, resource } = req.params;
      const { policy, view } = await limiter.inspect(tenant, resource).catch((err: unknown) => {
        if (err instanceof LimiterError) throw err;
        // e.g. READONLY: the region's address reaches a replica (inspect.lua refuses a view there).
        throw new LimiterError(
          "GQ_ERR_STORE_UNAVAILABLE",
          `the region's store gave no view of the key: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
      });
      const regions = limiter.regionShares(tenant, resource);
      return {
        tenant,
        resource,
        region: limiter.region,
        key: policy.tenant === tenant ? undefined : policy.tenant,
        resourceKey: policy.resource === resource ? undefined : policy.resource,
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
    },
  );

  const policiesDoc: RouteDoc = {
    summary: "Every policy this process uses",
    tags: ["admin"],
    admin: true,
    responses: { 200: { description: "the policies", schema: PolicyListSchema }, 401: unauthorized },
  };
  app.get("/v1/policies", { preHandler: requireAdmin, config: { openapi: policiesDoc } }, async () => {
    const p = limiter.policies;
    return {
      default: p.default,
      policies: [...p.entries].map(([k, spec]) => {
        const [tenant, resource] = k.split("|");
        return { tenant, resource, ...spec };
      }),
    };
  });

  registerAdminRoutes(app, { limiter, audit, requireAdmin });
  registerPolicyRoutes(app, {
    admin: policyAdmin,
    requireAdmin,
    keyMaxLength: limiter.keyMaxLength,
    regionIds: limiter.regions,
  });

  const doc = (
    summary: string,
    responses: RouteDoc["responses"],
    tags = ["ops"],
  ): { config: { openapi: RouteDoc } } => ({
    config: { openapi: { summary, tags, responses } },
  });
  app.get(
    "/metrics",
    doc("Prometheus metrics", { 200: { description: "exposition format", contentType: "text/plain" } }),
    async (_req, reply) => {
      return reply.header("content-type", registry.contentType).send(await registry.metrics());
    },
  );

  app.get(
    "/healthz",
    doc("Liveness", { 200: { description: "process up", schema: HealthSchema } }),
    async () => ({
      status: "ok",
      region: limiter.region,
    }),
  );

  app.get(
    "/readyz",
    doc("Readiness: the store answers and the region's policies are known", {
      200: { description: "ready", schema: ReadySchema },
      503: {
        description: "the store did not answer, or the policies are not known yet",
        schema: NotReadySchema,
      },
    }),
    async (_req, reply: FastifyReply) => {
      const ok = await limiter.ready();
      // A replicated region's limiter decides nothing before it has read its policies (§3.4).
      const known = policyAdmin.state().phase !== "unknown";
      if (!ok || !known) {
        const e = new LimiterError(ok ? "GQ_ERR_POLICY_UNKNOWN" : "GQ_ERR_STORE_UNAVAILABLE");
        events.emit(
          "warn",
          "http_5xx",
          "503 readyz",
          { status: 503, code: e.code, route: "/readyz" },
          "not ready",
        );
        // A probe's body stays plain JSON (its `status` field is not RFC 9457's numeric one).
        return reply.code(503).send({ ...errorBody(e), status: "not_ready", region: limiter.region });
      }
      return { status: "ready", region: limiter.region, breaker: limiter.breaker.state };
    },
  );

  let openapi: Record<string, unknown> | undefined;
  app.get(
    "/openapi.json",
    doc("This document (OpenAPI 3.1)", { 200: { description: "the document" } }, ["meta"]),
    async () => {
      openapi ??= openApiDocument(routes, {
        title: "geoquota regional limiter",
        version: "1",
        description: "One region's HTTP service: decisions, refunds, quota inspection, policy admin, ops.",
      });
      return openapi;
    },
  );

  return app;
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
