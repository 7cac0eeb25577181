// Fastify plugin for users' own routes (in the spirit of @fastify/rate-limit):
// a route opts in with `config: { rateLimit: { resource, cost?, key? } }`, or
// every route gets the plugin's `global` options. Denied requests get 429 with
// the same headers and body as POST /v1/check; deny-listed keys 403 (GQ_ERR_DENY_LISTED).
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
} from "fastify";
import { errorBody, LimiterError } from "./errors.js";
import { decisionBody, rateLimitHeaders } from "./headers.js";
import { ipKey } from "./key-hygiene.js";
import type { Limiter } from "./limiter.js";

/** Where a request's tenant key comes from. */
export type KeySource =
  | "ip"
  /** A header; when absent, `fallback` ("ip" or a fixed tenant such as "anonymous"). */
  | { readonly header: string; readonly fallback?: string }
  | ((request: FastifyRequest) => string);

export interface RouteRateLimit {
  readonly resource: string;
  readonly cost?: number | ((request: FastifyRequest) => number);
  readonly key?: KeySource;
}

export interface RateLimitPluginOptions {
  readonly limiter: Limiter;
  /** Default key source (default: client IP, aggregated). */
  readonly key?: KeySource;
  /** Applied to routes without their own `config.rateLimit` (routes opt out with `rateLimit: false`). */
  readonly global?: RouteRateLimit;
  readonly ipv4Prefix?: number;
  readonly ipv6Prefix?: number;
}

declare module "fastify" {
  interface FastifyContextConfig {
    rateLimit?: RouteRateLimit | false;
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

/** A preHandler hook enforcing one route's limit (usable without the plugin). */
export function rateLimitHook(
  limiter: Limiter,
  route: RouteRateLimit,
  defaults: Omit<RateLimitPluginOptions, "limiter"> = {},
) {
  const source = route.key ?? defaults.key ?? "ip";
  const v4 = defaults.ipv4Prefix ?? 24;
  const v6 = defaults.ipv6Prefix ?? 64;
  return async function geoquotaRateLimit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const tenant = keyOf(source, request, v4, v6);
    const cost = typeof route.cost === "function" ? route.cost(request) : (route.cost ?? 1);
    const r = await limiter.check(tenant, route.resource, cost);
    if (r.reason === "deny_list") {
      const err = new LimiterError("GQ_ERR_DENY_LISTED", `${route.resource}: the key is on the deny list`);
      await reply.code(403).send({ ...errorBody(err), ...decisionBody(r) });
      return;
    }
    reply.headers(rateLimitHeaders(r));
    if (!r.allowed) {
      const err = new LimiterError("GQ_ERR_RATE_LIMITED", `rate limit exceeded for ${route.resource}`);
      await reply.code(429).send({ ...errorBody(err), ...decisionBody(r) });
    }
  };
}

const plugin: FastifyPluginCallback<RateLimitPluginOptions> = (fastify: FastifyInstance, options, done) => {
  fastify.addHook("onRoute", (route: RouteOptions) => {
    const cfg = route.config?.rateLimit;
    const chosen = cfg === false ? undefined : (cfg ?? options.global);
    if (chosen === undefined) return;
    const hook = rateLimitHook(options.limiter, chosen, options);
    const existing = route.preHandler;
    route.preHandler =
      existing === undefined ? [hook] : Array.isArray(existing) ? [hook, ...existing] : [hook, existing];
  });
  done();
};

// Like fastify-plugin: the onRoute hook must apply to the registering scope's routes.
(plugin as unknown as Record<symbol, boolean>)[Symbol.for("skip-override")] = true;

export const geoquotaRateLimit = plugin;
