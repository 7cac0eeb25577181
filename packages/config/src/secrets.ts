// Secrets may be written inline (dev/demo files) or named by an environment
// variable (production), so the same schema serves both without secrets in git.
import { z } from "zod";

export const SecretRefSchema = z.union([
  z.string().min(16, "expected a secret of at least 16 characters"),
  z.object({ env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "expected an environment variable name") }).strict(),
]);
export type SecretRef = z.infer<typeof SecretRefSchema>;

/** The secret's value, or an error message naming the missing variable. */
export function resolveSecret(
  ref: SecretRef,
  env: Readonly<Record<string, string | undefined>>,
): { ok: true; value: string } | { ok: false; message: string } {
  if (typeof ref === "string") return { ok: true, value: ref };
  const value = env[ref.env];
  if (value === undefined || value === "") {
    return { ok: false, message: `environment variable ${ref.env} is not set` };
  }
  if (value.length < 16)
    return { ok: false, message: `environment variable ${ref.env}: expected at least 16 characters` };
  return { ok: true, value };
}
