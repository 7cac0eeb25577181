// Fastify plugin for users' own routes (in the spirit of @fastify/rate-limit,
// and usable beside it: the route option has its own name). A route opts in
// with `config: { geoquota: { resource, cost?, key? } }`, or every route gets
// the plugin's `global` options (a route opts out with `geoquota: false`).
// Denied requests get 429 with the same headers and body as POST /v1/check
// (or the draft's quota-exceeded problem details when the client asks for
// application/problem+json; or `errorResponseBuilder`'s body); deny-listed
// keys 403 (GQ_ERR_DENY_LISTED). Wrapped with fastify-plugin so its onRoute
// hook sees the routes of the scope that registered it.
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
} from "fastify";
import fp from "fastify-plugin";
import { errorBody, LimiterError } from "./errors.js";
import { decisionBody, type HeaderOptions, type PartitionKeyMode, rateLimitHeaders } from "./headers.js";
import { ipKey } from "./key-hygiene.js";
import type { CheckResult, Limiter } from "./limiter.js";
import { PROBLEM_JSON, prefersProblem, problemOf, quotaExceeded } from "./problem.js";

/** Where a request's tenant key comes from. */
export type KeySource =
  | "ip"
  /** A header; when absent, `fallback` ("ip" or a fixed tenant such as "anonymous"). */
  | { readonly header: string; readonly fallback?: string }
  | ((request: FastifyRequest) => string);

/** One route's limit: `config: { geoquota: GeoquotaRouteOptions }`. */
export interface GeoquotaRouteOptions {
  readonly resource: string;
  readonly cost?: number | ((request: FastifyRequest) => number);
  readonly key?: KeySource;
}

/** What `onExceeded` and `errorResponseBuilder` are told about a denial. */
export interface ExceededContext {
  /** 429. */
  readonly statusCode: number;
  readonly key: string;
  readonly resource: string;
  readonly cost: number;
  readonly result: CheckResult;
}

/** The lifecycle hook the check runs in. */
export type GeoquotaHook = "onRequest" | "preValidation" | "preHandler";

export interface GeoquotaPluginOptions {
  readonly limiter: Limiter;
  /** Default key source (default: client IP, aggregated). */
  readonly key?: KeySource;
  /** Applied to routes without their own `config.geoquota` (routes opt out with `geoquota: false`). */
  readonly global?: GeoquotaRouteOptions;
  readonly ipv4Prefix?: number;
  readonly ipv6Prefix?: number;
  /**
   * Where the check runs (default `preHandler`). `onRequest` refuses before the
   * body is read or parsed (the cheapest rejection); a `cost` or `key` function
   * that reads `request.body` needs `preValidation` or `preHandler`.
   */
  readonly hook?: GeoquotaHook;
  /** Called on every denial (429), before the response is sent; for logging or counting. */
  readonly onExceeded?: (request: FastifyRequest, context: ExceededContext) => void;
  /**
   * The body of a denial (429) instead of the default (the decision JSON with
   * `code: GQ_ERR_RATE_LIMITED`, or problem details when asked for). The
   * RateLimit headers and Retry-After are set either way.
   */
  readonly errorResponseBuilder?: (request: FastifyRequest, context: ExceededContext) => unknown;
  /**
   * When the check throws (a bug, a bad key from a key function), let the
   * request through instead of failing it (default false: the error goes to
   * Fastify's error handler). A store outage is not an error here: it is
   * decided by leases and `failMode` (fail-closed by default), so this never
   * lifts the global bound.
   */
  readonly skipOnError?: boolean;
  /** The `pk` parameter of the RateLimit headers (default `hash`: never the raw tenant id). */
  readonly partitionKey?: PartitionKeyMode;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** geoquota's per-route limit (named apart from @fastify/rate-limit's `rateLimit`). */
    geoquota?: GeoquotaRouteOptions | false;
  }
}

function keyOf(source: KeySource, request: FastifyRequest, v4: number, v6: number): string {
  if (typeof source === "function") return source(request);
  if (source === "ip") return ipKey(request.ip, v4, v6);
  const raw = request.headers[source.header.toLowerCase()];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value !== undefined && value !== "") return value;
  if (source.fallback === undefined || source.fallback === "ip") return ipKey(request.ip, v4, v6);
  return source.fallback;
}

/** A hook enforcing one route's limit (usable without the plugin as an onRequest, preValidation or preHandler hook). */
export function geoquotaHook(
  limiter: Limiter,
  route: GeoquotaRouteOptions,
  defaults: Omit<GeoquotaPluginOptions, "limiter"> = {},
) {
  const source = route.key ?? defaults.key ?? "ip";
  const v4 = defaults.ipv4Prefix ?? 24;
  const v6 = defaults.ipv6Prefix ?? 64;
  const headerOptions: HeaderOptions = {
    partitionKey: defaults.partitionKey ?? "hash",
    partitionKeySecret: limiter.partitionKeySecret,
  };
  return async function geoquotaLimit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    let tenant: string;
    let cost: number;
    let r: CheckResult;
    try {
      tenant = keyOf(source, request, v4, v6);
      cost = typeof route.cost === "function" ? route.cost(request) : (route.cost ?? 1);
      r = await limiter.check(tenant, route.resource, cost);
    } catch (err) {
      if (defaults.skipOnError === true) return;
      throw err;
    }
    const problem = prefersProblem(request.headers.accept);
    if (r.reason === "deny_list") {
      const err = new LimiterError("GQ_ERR_DENY_LISTED", `${route.resource}: the key is on the deny list`);
      if (problem)
        await reply
          .code(403)
          .type(PROBLEM_JSON)
          .send(problemOf(err, decisionBody(r)));
      else await reply.code(403).send({ ...errorBody(err), ...decisionBody(r) });
      return reply;
    }
    reply.headers(rateLimitHeaders(r, headerOptions));
    if (r.allowed) return;
    const context: ExceededContext = {
      statusCode: 429,
      key: tenant,
      resource: route.resource,
      cost,
      result: r,
    };
    defaults.onExceeded?.(request, context);
    reply.code(429);
    if (defaults.errorResponseBuilder !== undefined) {
      await reply.send(defaults.errorResponseBuilder(request, context));
    } else {
      const err = new LimiterError("GQ_ERR_RATE_LIMITED", `rate limit exceeded for ${route.resource}`);
      const body = { ...errorBody(err), ...decisionBody(r) };
      if (problem) await reply.type(PROBLEM_JSON).send(quotaExceeded([r.scope], err.message, body));
      else await reply.send(body);
    }
    return reply;
  };
}

// Not preParsing: an async preParsing hook's return value replaces the body stream.
const HOOKS: readonly GeoquotaHook[] = ["onRequest", "preValidation", "preHandler"];

const plugin: FastifyPluginCallback<GeoquotaPluginOptions> = (fastify: FastifyInstance, options, done) => {
  const stage = options.hook ?? "preHandler";
  if (!HOOKS.includes(stage)) {
    done(new Error(`geoquota plugin: hook must be one of ${HOOKS.join(", ")}, got ${String(stage)}`));
    return;
  }
  fastify.addHook("onRoute", (route: RouteOptions) => {
    const cfg = route.config?.geoquota;
    const chosen = cfg === false ? undefined : (cfg ?? options.global);
    if (chosen === undefined) return;
    const hook = geoquotaHook(options.limiter, chosen, options);
    // First in its stage: a denied request runs none of the route's own hooks of that stage.
    const existing = (route as unknown as Record<GeoquotaHook, unknown>)[stage];
    (route as unknown as Record<GeoquotaHook, unknown>)[stage] =
      existing === undefined ? [hook] : Array.isArray(existing) ? [hook, ...existing] : [hook, existing];
  });
  done();
};

/** The plugin (fastify-plugin wrapped: not encapsulated, so it applies to the registering scope's routes). */
export const geoquotaRateLimit = fp(plugin, { fastify: "5.x", name: "@geoquota/limiter" });
