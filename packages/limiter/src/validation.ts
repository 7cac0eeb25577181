// Request and response schemas of the HTTP service (zod; /openapi.json is
// generated from the same schemas, see openapi.ts). Every 400 names the
// offending field (`cost: ...`, `limits[1].tenant: ...`) so clients can fix
// requests without the source.
import { formatPath } from "@geoquota/config";
import { z } from "zod";
import { LimiterError } from "./errors.js";
import { RECEIPT_CHARS_MAX } from "./receipts.js";

export const COST_MAX = 1e9;
export const COMPOUND_LIMITS_MAX = 16;

const positiveCost = z
  .number({ error: "expected a finite number > 0" })
  .refine(
    (n) => Number.isFinite(n) && n > 0 && n <= COST_MAX,
    `expected a finite number > 0 and ≤ ${COST_MAX}`,
  );
// A check's cost may be 0: check only (counts nothing; allowed while one unit is left).
const checkCost = z
  .number({ error: "expected a finite number ≥ 0" })
  .refine(
    (n) => Number.isFinite(n) && n >= 0 && n <= COST_MAX,
    `expected a finite number ≥ 0 and ≤ ${COST_MAX}`,
  );
// Key length is checked by Limiter.resolve (GQ_ERR_KEY_TOO_LONG); any characters are
// accepted (stored hashed when outside [A-Za-z0-9_.-]).
const keyPart = z
  .string({ error: "expected a non-empty string" })
  .min(1, "expected a non-empty string")
  .meta({ description: "any characters; at most keyMaxLength (128) characters" });

export const SingleCheckSchema = z
  .strictObject({
    tenant: keyPart,
    resource: keyPart,
    cost: checkCost.default(1).meta({
      description: `≥ 0 and ≤ ${COST_MAX}; fractions allowed; 0 = check only: counts nothing, allowed while one unit is left`,
    }),
  })
  .meta({ id: "SingleCheck" });
export const CompoundCheckSchema = z
  .strictObject({
    limits: z
      .array(SingleCheckSchema)
      .min(1, "expected at least one limit")
      .max(COMPOUND_LIMITS_MAX, `expected at most ${COMPOUND_LIMITS_MAX} limits`)
      .superRefine((items, ctx) => {
        const seen = new Set<string>();
        items.forEach((i, idx) => {
          const k = `${i.tenant}|${i.resource}`;
          if (seen.has(k))
            ctx.addIssue({ code: "custom", message: "duplicate tenant/resource", path: [idx] });
          seen.add(k);
        });
      }),
  })
  .meta({ id: "CompoundCheck" });

/** POST /v1/refund: the receipt an allowed check returned; cost defaults to the receipt's. */
export const RefundSchema = z.strictObject({
  tenant: keyPart,
  resource: keyPart,
  receipt: z
    .string({ error: "expected the refundReceipt string of an allowed check" })
    .min(1, "expected the refundReceipt string of an allowed check")
    .max(RECEIPT_CHARS_MAX, `expected at most ${RECEIPT_CHARS_MAX} characters`),
  cost: positiveCost.optional(),
});

export type SingleCheck = z.output<typeof SingleCheckSchema>;
export type CompoundCheck = z.output<typeof CompoundCheckSchema>;

/** Parses or throws a GQ_ERR_INVALID_BODY naming the first bad field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new LimiterError("GQ_ERR_INVALID_BODY", "body: expected a JSON object", { field: "body" });
  }
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  // Unknown keys: name the key itself, not the object holding it.
  const path = issue.code === "unrecognized_keys" ? [...issue.path, ...issue.keys.slice(0, 1)] : issue.path;
  const field = formatPath(path);
  const message = issue.code === "unrecognized_keys" ? "unknown field" : issue.message;
  throw new LimiterError("GQ_ERR_INVALID_BODY", `${field}: ${message}`, { field });
}

/** POST /v1/check: the compound form when the body has `limits`, else the single form. */
export const CheckBodySchema = z.union([SingleCheckSchema, CompoundCheckSchema]);

export function parseCheckBody(body: unknown): SingleCheck | CompoundCheck {
  const compound = body !== null && typeof body === "object" && "limits" in body;
  return compound ? parseBody(CompoundCheckSchema, body) : parseBody(SingleCheckSchema, body);
}

// Responses (documented in /openapi.json; the tests parse real responses with them).
const wholeTokens = z.number().int().min(0);
const scopePair = z.strictObject({ limit: wholeTokens, remaining: wholeTokens });

export const DecisionSchema = z
  .strictObject({
    allowed: z.boolean(),
    limit: wholeTokens.meta({ description: "capacity of `scope`, whole tokens" }),
    remaining: wholeTokens.meta({ description: "what `scope` could still admit now, whole tokens" }),
    scope: z.enum(["region", "process"]).meta({
      description: "region: this region's slice (a store decision); process: this process's own tokens",
    }),
    resetSeconds: z.number().min(0),
    retryAfterSeconds: z.number().min(0),
    region: z.string(),
    degraded: z.boolean(),
    global: z.strictObject({ limit: wholeTokens.meta({ description: "the global capacity C" }) }),
    regional: scopePair.optional(),
    process: scopePair.optional(),
    failOpenBound: z
      .strictObject({ refillPerSecond: z.number(), capacity: z.number(), scope: z.literal("per_process") })
      .optional(),
    refundReceipt: z
      .string()
      .optional()
      .meta({ description: "allowed store decisions: the receipt POST /v1/refund takes (each once)" }),
    reason: z
      .enum(["allow_list", "deny_list", "policy_unknown", "not_evaluated"])
      .optional()
      .meta({
        description:
          "allow_list / deny_list: decided by the policies' lists without the store; policy_unknown: " +
          "this limiter does not know the current policy (fail closed); not_evaluated: a compound " +
          "part left undecided because another part is deny-listed",
      }),
    wouldDeny: z.boolean().optional().meta({
      description: "shadow policies only: the policy would have denied (the decision is still allowed)",
    }),
  })
  .meta({ id: "Decision" });

export const CompoundDecisionSchema = DecisionSchema.extend({
  failedIndex: z.number().int().min(-1),
  parts: z.array(DecisionSchema.extend({ tenant: z.string(), resource: z.string() })),
}).meta({ id: "CompoundDecision" });

export const CheckResponseSchema = z.union([DecisionSchema, CompoundDecisionSchema]);

export const ErrorSchema = z
  .strictObject({
    statusCode: z.number().int(),
    code: z.string().meta({ description: "GQ_ERR_* (README, error catalog)" }),
    error: z.string(),
    message: z.string(),
    field: z.string().optional(),
  })
  .meta({ id: "Error" });

/** The plugin's denial: the error fields plus the decision. */
export const RateLimitedSchema = z.strictObject({ ...ErrorSchema.shape, ...DecisionSchema.shape });

export const KeyParamsSchema = z.strictObject({ tenant: z.string(), resource: z.string() });

export const QuotaViewSchema = z
  .looseObject({
    tenant: z.string(),
    resource: z.string(),
    region: z.string(),
    key: z.string().optional().meta({ description: "the stored tenant, when hashed" }),
    resourceKey: z.string().optional().meta({ description: "the stored resource, when hashed" }),
    policy: z.looseObject({ baseShare: z.number(), floorShare: z.number() }),
    share: z.number(),
    recovering: z.boolean(),
    tokens: z.number(),
    nowUs: z.number(),
    regions: z.array(z.strictObject({ id: z.string(), baseShare: z.number(), floorShare: z.number() })),
    knownShares: z.record(z.string(), z.number()),
    counters: z.looseObject({}),
    loans: z.strictObject({ out: z.array(z.looseObject({})), in: z.array(z.looseObject({})) }),
    breaker: z.enum(["closed", "open", "half_open"]),
  })
  .meta({ id: "QuotaView" });

export const PolicyListSchema = z.strictObject({
  default: z.looseObject({}),
  policies: z.array(z.looseObject({ tenant: z.string(), resource: z.string() })),
});

export const HealthSchema = z.strictObject({ status: z.literal("ok"), region: z.string() });
export const ReadySchema = z.strictObject({
  status: z.literal("ready"),
  region: z.string(),
  breaker: z.string(),
});
export const NotReadySchema = z.strictObject({
  ...ErrorSchema.shape,
  status: z.literal("not_ready"),
  region: z.string(),
});
