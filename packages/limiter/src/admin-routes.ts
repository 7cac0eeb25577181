// Admin routes beyond the policy documents (docs/design.md §3.4), behind the admin token:
//   POST /v1/quotas/:tenant/:resource/reset  the key's state in THIS region restarted empty
//   GET  /v1/policy/history                  the region's audit records, newest first
// and the audit of every admin change: each authenticated admin request that is not a read
// (any method but GET/HEAD, on any route guarded by the admin token, present or future)
// writes one structured log line (`event: "admin_change"`) and, when it succeeded, one record
// in the region's Redis (a list capped at AUDIT_RECORDS_MAX): who (the `X-Geoquota-Actor`
// header, and a digest naming the token), from where, which route, and the state before and
// after (the policy version and a digest of its document; the entry or key concerned).
import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { LimiterError } from "./errors.js";
import type { Limiter } from "./limiter.js";
import type { RouteDoc } from "./openapi.js";
import type { PolicyAdmin } from "./policy-source.js";
import { ErrorSchema } from "./validation.js";

/** Records kept per region (older ones drop off the list). */
export const AUDIT_RECORDS_MAX = 1000;
/** The Redis list of a region's audit records (one key; its hash tag keeps it in one slot). */
export const AUDIT_KEY = "gq:{admin}:audit";
export const ACTOR_HEADER = "x-geoquota-actor";
const ACTOR_CHARS_MAX = 128;
/** A request body kept in a record up to this many characters of JSON; a digest beyond. */
const BODY_CHARS_MAX = 2048;

export interface AuditRecord {
  readonly at: string;
  readonly region: string;
  /** The X-Geoquota-Actor header (printable, ≤ 128 characters), else "unnamed". */
  readonly actor: string;
  /** `sha256:` + 12 hex of the bearer token: which token, without the token. */
  readonly token: string;
  readonly address: string;
  readonly method: string;
  readonly route: string;
  readonly params: Readonly<Record<string, string>>;
  readonly status: number;
  readonly before: StateSummary;
  readonly after: StateSummary;
  /** The request body as JSON (≤ 2048 characters), else its digest. */
  readonly request?: unknown;
  readonly requestDigest?: string;
}

interface StateSummary {
  readonly target: string | null;
  readonly completed: string | null;
  readonly policiesDigest: string | null;
  /** The entry the route names (tenant/resource params), as the document had it. */
  readonly entry?: unknown;
  /** A reset: what the key could admit in this region (before / after). */
  readonly tokens?: number;
}

/** Where a region keeps its audit records. */
export interface AuditLog {
  append(record: AuditRecord): Promise<void>;
  /** Newest first, at most `limit`. */
  list(limit: number): Promise<AuditRecord[]>;
}

/** In-process (tests, and a limiter without Redis): lost on restart. */
export class MemoryAuditLog implements AuditLog {
  private readonly records: AuditRecord[] = [];
  async append(record: AuditRecord): Promise<void> {
    this.records.unshift(record);
    if (this.records.length > AUDIT_RECORDS_MAX) this.records.length = AUDIT_RECORDS_MAX;
  }
  async list(limit: number): Promise<AuditRecord[]> {
    return this.records.slice(0, limit);
  }
}

/** The commands of ioredis (Redis or Cluster) the Redis audit log uses. */
export interface AuditRedis {
  multi(): {
    lpush(k: string, v: string): unknown;
    ltrim(k: string, a: number, b: number): unknown;
    exec(): Promise<unknown>;
  };
  lrange(k: string, a: number, b: number): Promise<string[]>;
}

/** The region's Redis: LPUSH + LTRIM in one MULTI, so the list never exceeds its cap. */
export class RedisAuditLog implements AuditLog {
  constructor(private readonly redis: AuditRedis) {}
  async append(record: AuditRecord): Promise<void> {
    const m = this.redis.multi();
    m.lpush(AUDIT_KEY, JSON.stringify(record));
    m.ltrim(AUDIT_KEY, 0, AUDIT_RECORDS_MAX - 1);
    await m.exec();
  }
  async list(limit: number): Promise<AuditRecord[]> {
    const raw = await this.redis.lrange(AUDIT_KEY, 0, limit - 1);
    return raw.flatMap((s) => {
      try {
        return [JSON.parse(s) as AuditRecord];
      } catch {
        return [];
      }
    });
  }
}

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const vid = (v: { version: number; origin: string } | null) =>
  v === null ? null : `v${v.version}@${v.origin}`;

/** The actor a request names: the header if printable and short, else "unnamed". */
function actorOf(req: FastifyRequest): string {
  const h = req.headers[ACTOR_HEADER];
  const v = Array.isArray(h) ? h[0] : h;
  if (typeof v !== "string") return "unnamed";
  const t = v.trim();
  // Printable ASCII and beyond, no control characters: a log line stays one line.
  const printable = [...t].every((ch) => {
    const c = ch.charCodeAt(0);
    return c >= 0x20 && c !== 0x7f;
  });
  return t.length > 0 && t.length <= ACTOR_CHARS_MAX && printable ? t : "unnamed";
}

function tokenOf(req: FastifyRequest): string {
  const h = req.headers.authorization;
  const token = typeof h === "string" && h.startsWith("Bearer ") ? h.slice(7) : "";
  return `sha256:${sha(token).slice(0, 12)}`;
}

/** The entry of a policies document for (tenant, resource), if any. */
function entryOf(doc: unknown, tenant: string, resource: string): unknown {
  const d = doc as { policies?: Record<string, unknown>[] } | null;
  return d?.policies?.find((p) => p.tenant === tenant && p.resource === resource) ?? null;
}

function summary(admin: PolicyAdmin, params: Readonly<Record<string, string>>): StateSummary {
  const s = admin.state();
  const doc = s.policies;
  const digest = doc === null || doc === undefined ? null : `sha256:${sha(JSON.stringify(doc)).slice(0, 16)}`;
  const named = params.tenant !== undefined && params.resource !== undefined;
  return {
    target: vid(s.target),
    completed: vid(s.completed),
    policiesDigest: digest,
    ...(named ? { entry: entryOf(doc, params.tenant as string, params.resource as string) } : {}),
  };
}

interface Pending {
  readonly before: StateSummary;
}

const ResetResultSchema = z
  .strictObject({
    tenant: z.string(),
    resource: z.string(),
    region: z.string(),
    key: z.string().meta({ description: "the stored tenant (hashed when not plain)" }),
    resourceKey: z.string(),
    algorithm: z.string(),
    before: z.number().meta({ description: "what the key could admit in this region just before" }),
    after: z.number().meta({ description: "just after: 0 (more only while in-process leases are out)" }),
    share: z.number(),
    nowUs: z.number(),
  })
  .meta({ id: "ResetResult" });

const HistorySchema = z
  .strictObject({ region: z.string(), records: z.array(z.looseObject({})) })
  .meta({ id: "AuditHistory" });

/**
 * Wraps the admin guard so that every authenticated change is audited (one hook for all
 * admin routes: a route added later is covered without code of its own). Returns the guard
 * to use on admin routes.
 */
export function auditAdminRoutes(
  app: FastifyInstance,
  deps: {
    readonly region: string;
    readonly admin: () => PolicyAdmin;
    readonly audit: AuditLog;
    readonly requireAdmin: (req: FastifyRequest) => Promise<void>;
  },
): (req: FastifyRequest) => Promise<void> {
  const pending = new WeakMap<FastifyRequest, Pending>();
  app.addHook("onSend", async (req: FastifyRequest, reply: FastifyReply, payload) => {
    const p = pending.get(req);
    if (p === undefined) return payload;
    pending.delete(req);
    const params = (req.params ?? {}) as Record<string, string>;
    const after = summary(deps.admin(), params);
    const tokens = resetTokensOf(req);
    const body = req.body;
    const text = body === undefined ? undefined : JSON.stringify(body);
    const record: AuditRecord = {
      at: new Date().toISOString(),
      region: deps.region,
      actor: actorOf(req),
      token: tokenOf(req),
      address: req.ip,
      method: req.method,
      route: req.routeOptions.url ?? req.url,
      params,
      status: reply.statusCode,
      before: tokens !== undefined ? { ...p.before, tokens: tokens.before } : p.before,
      after: tokens !== undefined ? { ...after, tokens: tokens.after } : after,
      ...(text === undefined
        ? {}
        : text.length <= BODY_CHARS_MAX
          ? { request: body }
          : { requestDigest: `sha256:${sha(text).slice(0, 16)}` }),
    };
    const ok = reply.statusCode < 400;
    req.log.info({ event: "admin_change", ok, ...record }, ok ? "admin change" : "admin change refused");
    if (ok) {
      try {
        await deps.audit.append(record);
      } catch (err) {
        // The change is made; a lost record is logged (the log line above still has it).
        req.log.error({ event: "audit_write_failed", err: (err as Error).message }, "audit record not kept");
      }
    }
    return payload;
  });
  return async (req) => {
    await deps.requireAdmin(req);
    if (req.method === "GET" || req.method === "HEAD") return;
    pending.set(req, { before: summary(deps.admin(), (req.params ?? {}) as Record<string, string>) });
  };
}

/** Records the token counts of a reset for the request's audit record. */
function noteTokens(req: FastifyRequest, before: number, after: number): void {
  (req as FastifyRequest & { gqResetTokens?: { before: number; after: number } }).gqResetTokens = {
    before,
    after,
  };
}

export function registerAdminRoutes(
  app: FastifyInstance,
  deps: {
    readonly limiter: Limiter;
    readonly audit: AuditLog;
    readonly requireAdmin: (req: FastifyRequest) => Promise<void>;
  },
): void {
  const { limiter, audit, requireAdmin } = deps;
  const unauthorized = { description: "missing or wrong bearer token", schema: ErrorSchema };
  const resetDoc: RouteDoc = {
    summary: "Restart one key's state in this region EMPTY (never full: the global bound holds)",
    description:
      "What the key may still admit here drops to 0 and refills from now at the region's rate; " +
      "refunds of earlier admissions give nothing back; counters, loans and leases stay. Other " +
      "regions are untouched: reset there too for the whole cluster.",
    tags: ["admin"],
    admin: true,
    responses: {
      200: { description: "reset", schema: ResetResultSchema },
      400: { description: "invalid key; `field` names it", schema: ErrorSchema },
      401: unauthorized,
      501: { description: "the store cannot reset", schema: ErrorSchema },
    },
  };
  app.post<{ Params: { tenant: string; resource: string } }>(
    "/v1/quotas/:tenant/:resource/reset",
    { preHandler: requireAdmin, config: { openapi: resetDoc } },
    async (req) => {
      const { tenant, resource } = req.params;
      const r = await limiter.reset(tenant, resource);
      noteTokens(req, r.before, r.after);
      return {
        tenant,
        resource,
        region: limiter.region,
        key: r.policy.tenant,
        resourceKey: r.policy.resource,
        algorithm: r.policy.limit.algorithm,
        before: r.before,
        after: r.after,
        share: r.share,
        nowUs: r.nowUs,
      };
    },
  );

  const historyDoc: RouteDoc = {
    summary: "This region's audit records of admin changes, newest first (at most 1000 kept)",
    tags: ["admin"],
    admin: true,
    responses: { 200: { description: "the records", schema: HistorySchema }, 401: unauthorized },
  };
  app.get<{ Querystring: { limit?: string } }>(
    "/v1/policy/history",
    { preHandler: requireAdmin, config: { openapi: historyDoc } },
    async (req) => {
      const raw = req.query.limit;
      const limit = raw === undefined ? 100 : Number(raw);
      if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_RECORDS_MAX) {
        throw new LimiterError(
          "GQ_ERR_INVALID_BODY",
          `limit: expected an integer in [1, ${AUDIT_RECORDS_MAX}]`,
          {
            field: "limit",
          },
        );
      }
      return { region: limiter.region, records: await audit.list(limit) };
    },
  );
}

/** The reset counts noted on a request (auditAdminRoutes reads them at onSend). */
export function resetTokensOf(req: FastifyRequest): { before: number; after: number } | undefined {
  return (req as FastifyRequest & { gqResetTokens?: { before: number; after: number } }).gqResetTokens;
}
