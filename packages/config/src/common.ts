import { z } from "zod";

import { NAME_MESSAGE, NAME_PATTERN } from "@geoquota/core";

export { SHARE_UNITS } from "@geoquota/core";

/** Same charset as keys and field names in Redis (@geoquota/core ids, docs/internals.md). */
export const ID_PATTERN = NAME_PATTERN;
export const ID_MESSAGE = NAME_MESSAGE;
export const idSchema = z.string().regex(ID_PATTERN, ID_MESSAGE);

export function intIn(min: number, max: number) {
  return z
    .number({ error: `expected integer in [${min}, ${max}]` })
    .int(`expected integer in [${min}, ${max}]`)
    .min(min, `expected number ≥ ${min}`)
    .max(max, `expected number ≤ ${max}`);
}

export const portSchema = intIn(0, 65535);
export const hostSchema = z.string().min(1, "expected a host name or address").max(255);
export const listenSchema = z.strictObject({ host: hostSchema, port: portSchema });

/** `host:port`, IPv6 in brackets: `[::1]:7201`. */
export const endpointSchema = z
  .string()
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "expected host:port")
  .refine((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, "port out of range");
