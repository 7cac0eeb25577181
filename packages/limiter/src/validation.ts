// Request bodies. Every 400 names the offending field (`cost: ...`,
// `limits[1].tenant: ...`) so clients can fix requests without the source.
import { formatPath } from "@geoquota/config";
import { z } from "zod";
import { LimiterError } from "./errors.js";
import { RECEIPT_CHARS_MAX } from "./receipts.js";

export const COST_MAX = 1e9;
export const COMPOUND_LIMITS_MAX = 16;

const cost = z
  .number({ error: "expected a finite number > 0" })
  .refine(
    (n) => Number.isFinite(n) && n > 0 && n <= COST_MAX,
    `expected a finite number > 0 and ≤ ${COST_MAX}`,
  );
// Key charset and length are checked by Limiter.resolve (GQ_ERR_INVALID_KEY / GQ_ERR_KEY_TOO_LONG).
const keyPart = z.string({ error: "expected a non-empty string" }).min(1, "expected a non-empty string");

export const SingleCheckSchema = z.strictObject({
  tenant: keyPart,
  resource: keyPart,
  cost: cost.default(1),
});
export const CompoundCheckSchema = z.strictObject({
  limits: z
    .array(SingleCheckSchema)
    .min(1, "expected at least one limit")
    .max(COMPOUND_LIMITS_MAX, `expected at most ${COMPOUND_LIMITS_MAX} limits`)
    .superRefine((items, ctx) => {
      const seen = new Set<string>();
      items.forEach((i, idx) => {
        const k = `${i.tenant}|${i.resource}`;
        if (seen.has(k)) ctx.addIssue({ code: "custom", message: "duplicate tenant/resource", path: [idx] });
        seen.add(k);
      });
    }),
});

/** POST /v1/refund: the receipt an allowed check returned; cost defaults to the receipt's. */
export const RefundSchema = z.strictObject({
  tenant: keyPart,
  resource: keyPart,
  receipt: z
    .string({ error: "expected the refundReceipt string of an allowed check" })
    .min(1, "expected the refundReceipt string of an allowed check")
    .max(RECEIPT_CHARS_MAX, `expected at most ${RECEIPT_CHARS_MAX} characters`),
  cost: cost.optional(),
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
