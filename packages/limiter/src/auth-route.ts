// GET /v1/auth: the check for gateways that read only a status code — nginx's
// `auth_request` sends a GET subrequest without a body and maps 2xx → allow,
// 401/403 → deny with that code, anything else → 500 to its client. So the
// decision is the status: 204 admitted, 403 denied (rate limited or deny
// listed, told apart by X-Geoquota-Decision), and every input error 401: a 400
// would reach nginx as "limiter broken", which a fail-open gateway lets
// through — a client could then skip its limit by sending an over-long tenant.
// The decision itself is Limiter.check, the path POST /v1/check takes (same
// policies, degraded modes, metrics); only 5xx (a bug) remain for the
// gateway's own fail mode.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { LimiterError } from "./errors.js";
import { DECISION_HEADER_NAMES, decisionBody, type HeaderOptions, rateLimitHeaders } from "./headers.js";
import type { Limiter } from "./limiter.js";
import type { RouteDoc } from "./openapi.js";
import { DecisionSchema, ErrorSchema, parseBody, SingleCheckSchema } from "./validation.js";

/** Where each field may come from: a query parameter of this name, or this header. */
export const AUTH_FIELDS = {
  tenant: "x-geoquota-tenant",
  resource: "x-geoquota-resource",
  cost: "x-geoquota-cost",
} as const;
type AuthField = keyof typeof AUTH_FIELDS;

/** `allowed`, `rate_limited` or `deny_list`: what a gateway's config branches on (both denials are 403). */
export const DECISION_HEADER = "x-geoquota-decision";
/** On a 401: the catalog code of the input error and the field it names. */
export const ERROR_HEADER = "x-geoquota-error";
export const FIELD_HEADER = "x-geoquota-field";

const AUTH_DOC: RouteDoc = {
  summary: "Decide and charge one limit, answered by status (nginx auth_request)",
  description:
    "The single check of POST /v1/check for a gateway that reads only the status. `tenant`, " +
    "`resource` and `cost` (default 1; 0 = check only) come from query parameters or from the " +
    "X-Geoquota-Tenant / X-Geoquota-Resource / X-Geoquota-Cost headers (one source per field; header " +
    "values are UTF-8). Admitted: 204 with the RateLimit fields. Denied: 403 — rate limited with " +
    "Retry-After and the RateLimit fields, or deny-listed without them; X-Geoquota-Decision tells " +
    "which. Bad input: 401 (never a 400: nginx would turn it into its fail mode), X-Geoquota-Error " +
    "naming the catalog code.",
  tags: ["limits"],
  parameters: [
    { name: "tenant", in: "query", description: "or the X-Geoquota-Tenant header" },
    { name: "resource", in: "query", description: "or the X-Geoquota-Resource header" },
    { name: "cost", in: "query", description: "≥ 0, default 1; or the X-Geoquota-Cost header" },
  ],
  responses: {
    204: { description: "admitted", headers: [...DECISION_HEADER_NAMES, "X-Geoquota-Decision"] },
    401: {
      description: "invalid input (GQ_ERR_AUTH_INVALID; `field` names it)",
      schema: ErrorSchema,
      headers: ["X-Geoquota-Error", "X-Geoquota-Field"],
    },
    403: {
      description: "denied: rate limited (with Retry-After and the RateLimit fields) or deny-listed",
      schema: DecisionSchema,
      headers: [...DECISION_HEADER_NAMES, "Retry-After", "X-Geoquota-Decision"],
    },
  },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });
/** A plain decimal number (what a gateway writes), not whatever Number() accepts ("", "0x1", " 1"). */
const DECIMAL = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

const invalid = (field: string, message: string) =>
  new LimiterError("GQ_ERR_INVALID_BODY", `${field}: ${message}`, { field });

/** One field from the query or its header (never both), as a string. */
function fieldOf(req: FastifyRequest, name: AuthField): string | undefined {
  const query = (req.query ?? {}) as Record<string, unknown>;
  const q = query[name];
  const h = req.headers[AUTH_FIELDS[name]];
  if (Array.isArray(q)) throw invalid(name, "query parameter given more than once");
  if (Array.isArray(h)) throw invalid(name, `${AUTH_FIELDS[name]} given more than once`);
  if (q !== undefined && h !== undefined)
    throw invalid(name, `given both as query parameter and as ${AUTH_FIELDS[name]}`);
  if (typeof q === "string") return q;
  if (typeof h !== "string") return undefined;
  // Node reads header bytes as latin1; a gateway passes the client's UTF-8 bytes through.
  try {
    return utf8.decode(Buffer.from(h, "latin1"));
  } catch {
    throw invalid(name, `${AUTH_FIELDS[name]} is not valid UTF-8`);
  }
}

/** The check the request names, validated as POST /v1/check's single form. */
function parseAuthRequest(req: FastifyRequest): { tenant: string; resource: string; cost: number } {
  const query = (req.query ?? {}) as Record<string, unknown>;
  const unknown = Object.keys(query).find((k) => !(k in AUTH_FIELDS));
  if (unknown !== undefined) throw invalid(unknown, "unknown query parameter");
  const tenant = fieldOf(req, "tenant");
  const resource = fieldOf(req, "resource");
  const costText = fieldOf(req, "cost");
  if (costText !== undefined && !DECIMAL.test(costText))
    throw invalid("cost", `expected a decimal number ≥ 0, got ${JSON.stringify(costText.slice(0, 32))}`);
  return parseBody(SingleCheckSchema, {
    ...(tenant !== undefined ? { tenant } : {}),
    ...(resource !== undefined ? { resource } : {}),
    ...(costText !== undefined ? { cost: Number(costText) } : {}),
  });
}

export interface AuthRouteDeps {
  readonly limiter: Limiter;
  readonly headerOptions: HeaderOptions;
  /** How the app sends an error (JSON, or problem details when asked for). */
  readonly sendError: (req: FastifyRequest, reply: FastifyReply, e: LimiterError) => unknown;
}

export function registerAuthRoute(app: FastifyInstance, deps: AuthRouteDeps): void {
  const { limiter, headerOptions } = deps;
  app.get("/v1/auth", { config: { openapi: AUTH_DOC } }, async (req, reply) => {
    let r: Awaited<ReturnType<Limiter["check"]>>;
    try {
      const c = parseAuthRequest(req);
      r = await limiter.check(c.tenant, c.resource, c.cost);
    } catch (err) {
      // Input errors (bad field, key too long, unhashable key) deny with 401; a 5xx stays one.
      if (!(err instanceof LimiterError) || err.statusCode >= 500) throw err;
      reply.header(ERROR_HEADER, err.code);
      if (err.field !== undefined) reply.header(FIELD_HEADER, err.field);
      const e = new LimiterError("GQ_ERR_AUTH_INVALID", `${err.message} (${err.code})`, {
        ...(err.field !== undefined ? { field: err.field } : {}),
      });
      return deps.sendError(req, reply, e);
    }
    // A deny list is not a rate limit: no RateLimit fields, no Retry-After (as /v1/check's 403).
    if (r.reason === "deny_list")
      return reply.code(403).header(DECISION_HEADER, "deny_list").send(decisionBody(r));
    reply.headers(rateLimitHeaders(r, headerOptions));
    if (r.allowed) return reply.code(204).header(DECISION_HEADER, "allowed").send();
    return reply.code(403).header(DECISION_HEADER, "rate_limited").send(decisionBody(r));
  });
}
