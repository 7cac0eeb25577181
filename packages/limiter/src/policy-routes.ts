// The policy admin API (docs/design.md §3.4), behind the admin token:
//   GET /v1/policy                     the version rolled out, its document, each region's ack
//   PUT /v1/policy                     propose a whole policies document (If-Match: the version
//                                      it was based on, 412 when stale; required: 428 without,
//                                      `If-Match: *` = replace whatever is newest)
//   PUT /v1/policies/:tenant/:resource propose one entry, merged with concurrent edits of others
//   DELETE /v1/policies/:tenant/:resource  propose removing one entry (the same merge)
// Replicated: the region's gossip daemon numbers the proposal and rolls it out
// (202 once numbered); static (one region): applied here at once (200).
import { parsePolicySpec } from "@geoquota/config";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { LimiterError } from "./errors.js";
import { validateKeyPart } from "./key-hygiene.js";
import type { RouteDoc } from "./openapi.js";
import { formatVersion, type PolicyAdmin } from "./policy-source.js";
import { ErrorSchema } from "./validation.js";

const VersionIdSchema = z
  .strictObject({ version: z.number().int(), origin: z.string(), digest: z.string() })
  .nullable();
export const PolicyStateSchema = z
  .strictObject({
    region: z.string(),
    replicated: z.boolean(),
    phase: z.enum(["stable", "rolling_out", "waiting", "unknown"]),
    target: VersionIdSchema,
    completed: VersionIdSchema,
    growAtUs: z.number().nullable(),
    policies: z.unknown(),
    stamps: z.record(z.string(), z.strictObject({ v: z.number(), o: z.string(), p: z.string() })).nullable(),
    regions: z.array(z.strictObject({ id: z.string(), acked: VersionIdSchema })),
  })
  .meta({ id: "PolicyState" });

const bad = { description: "invalid policy; `field` names it", schema: ErrorSchema };
const unauthorized = { description: "missing or wrong bearer token", schema: ErrorSchema };
const proposed = {
  200: { description: "unchanged (replicated: the same document) or applied (one region)" },
  202: { description: "proposed: numbered by the gossip daemon and rolling out to every region" },
  400: bad,
  401: unauthorized,
};

export function registerPolicyRoutes(
  app: FastifyInstance,
  deps: {
    readonly admin: PolicyAdmin;
    readonly requireAdmin: (req: FastifyRequest) => Promise<void>;
    readonly keyMaxLength: number;
    readonly regionIds: readonly string[];
  },
): void {
  const { admin, requireAdmin } = deps;
  const getDoc: RouteDoc = {
    summary: "The policy version rolled out, its document, and each region's acknowledgement",
    tags: ["admin"],
    admin: true,
    responses: { 200: { description: "the rollout state", schema: PolicyStateSchema }, 401: unauthorized },
  };
  app.get("/v1/policy", { preHandler: requireAdmin, config: { openapi: getDoc } }, async (_req, reply) => {
    const s = admin.state();
    // The version a whole-document PUT is based on goes back in If-Match.
    if (s.target !== null) reply.header("etag", `"${formatVersion(s.target)}"`);
    return s;
  });

  const putDoc: RouteDoc = {
    summary:
      "Propose a whole policies document based on the version in If-Match (refused whole, naming the field, when invalid; 412 unless If-Match names the newest version; 428 without If-Match; `If-Match: *` replaces whatever is newest)",
    tags: ["admin"],
    admin: true,
    responses: {
      ...proposed,
      412: { description: "If-Match names a version that is no longer the newest", schema: ErrorSchema },
      428: {
        description:
          "no If-Match: the version the document was based on is required (`*`: whatever is newest)",
        schema: ErrorSchema,
      },
    },
  };
  app.put("/v1/policy", { preHandler: requireAdmin, config: { openapi: putDoc } }, async (req, reply) => {
    const ifMatch = req.headers["if-match"];
    // A whole document replaces every entry: sent without the version it was
    // based on, it would silently undo whatever changed since it was read (an
    // entry edit made meanwhile in another region, issue 22). So the base is
    // required (RFC 6585 428); `If-Match: *` is the explicit "replace whatever is newest".
    if (typeof ifMatch !== "string" || ifMatch.trim() === "")
      throw new LimiterError("GQ_ERR_POLICY_PRECONDITION_REQUIRED", undefined, { field: "If-Match" });
    const r = await admin.propose(req.body, { ifMatch });
    reply.code(r.unchanged || !r.state.replicated ? 200 : 202);
    return r;
  });

  const putOne: RouteDoc = {
    summary: "Propose one policy change (tenant `*`: the resource's default)",
    tags: ["admin"],
    admin: true,
    responses: proposed,
  };
  app.put<{ Params: { tenant: string; resource: string } }>(
    "/v1/policies/:tenant/:resource",
    { preHandler: requireAdmin, config: { openapi: putOne } },
    async (req, reply) => {
      const { tenant, resource } = req.params;
      if (tenant !== "*") validateKeyPart("tenant", tenant, deps.keyMaxLength);
      validateKeyPart("resource", resource, deps.keyMaxLength);
      const spec = parsePolicySpec(req.body, deps.regionIds);
      if (!spec.ok) {
        const first = spec.issues[0] ?? "body: invalid";
        throw new LimiterError("GQ_ERR_INVALID_POLICY", first, { field: first.slice(0, first.indexOf(":")) });
      }
      // One entry, merged by the daemons with concurrent edits of other entries
      // (issue 22); an edit of the same entry resolves to the highest stamp
      // (GET /v1/policy `stamps` shows which edit holds each entry).
      const r = await admin.proposeEntry(tenant, resource, req.body as Record<string, unknown>);
      req.log.info({ event: "policy_changed", tenant, resource, spec: spec.spec }, "policy changed");
      reply.code(r.unchanged || !r.state.replicated ? 200 : 202);
      return { tenant, resource, ...spec.spec, ...r };
    },
  );

  const deleteOne: RouteDoc = {
    summary:
      "Propose removing one policy entry (tenant `*`: the resource's default); the key falls back to the resource's default, then the global default",
    tags: ["admin"],
    admin: true,
    responses: {
      ...proposed,
      404: { description: "no such entry in the newest document", schema: ErrorSchema },
    },
  };
  app.delete<{ Params: { tenant: string; resource: string } }>(
    "/v1/policies/:tenant/:resource",
    { preHandler: requireAdmin, config: { openapi: deleteOne } },
    async (req, reply) => {
      const { tenant, resource } = req.params;
      if (tenant !== "*") validateKeyPart("tenant", tenant, deps.keyMaxLength);
      validateKeyPart("resource", resource, deps.keyMaxLength);
      const doc = admin.state().policies as { policies?: { tenant?: unknown; resource?: unknown }[] } | null;
      const present = (doc?.policies ?? []).some((p) => p.tenant === tenant && p.resource === resource);
      if (doc !== null && !present) {
        throw new LimiterError(
          "GQ_ERR_POLICY_ENTRY_NOT_FOUND",
          `no policy entry ${tenant}/${resource} in the newest document`,
          {
            field: "entry",
          },
        );
      }
      // Removed through the same per-entry merge as an edit: concurrent edits of
      // other entries survive; a concurrent edit of this entry resolves to the
      // highest stamp (issue 22).
      const r = await admin.proposeEntry(tenant, resource, null);
      req.log.info({ event: "policy_deleted", tenant, resource }, "policy entry removed");
      reply.code(r.unchanged || !r.state.replicated ? 200 : 202);
      return { tenant, resource, deleted: true, ...r };
    },
  );
}
