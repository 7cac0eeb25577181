// Config errors name the file and the field path so an operator can fix the
// file without reading code: `regions/us-east.json: gossip.round.minMs: ...`.
import type { z } from "zod";

export const CONFIG_ERROR_CODE = "GQ_ERR_CONFIG_INVALID";

export class ConfigError extends Error {
  readonly code = CONFIG_ERROR_CODE;
  readonly file: string;
  /** One entry per problem: `field.path: message`. */
  readonly issues: readonly string[];
  constructor(file: string, issues: readonly string[]) {
    super(issues.map((i) => `${file}: ${i}`).join("\n"));
    this.name = "ConfigError";
    this.file = file;
    this.issues = issues;
  }
}

/** `a.b[2].c` from a zod issue path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out === "" ? String(p) : `.${String(p)}`;
  }
  return out === "" ? "(root)" : out;
}

export function issuesOf(error: z.ZodError): string[] {
  return error.issues.map((i) => `${formatPath(i.path)}: ${i.message}`);
}
