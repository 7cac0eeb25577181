// Reply decoding: scripts return floats as %.17g strings (Redis would
// truncate Lua numbers to integers) and times as integers.
import { RedisStoreError } from "./errors.js";

export function num(v: unknown, what: string): number {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : Number.NaN;
  if (Number.isNaN(n)) throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `${what}: ${String(v)}`);
  return n;
}

export function str(v: unknown, what: string): string {
  if (typeof v === "string") return v;
  if (Buffer.isBuffer(v)) return v.toString("utf8");
  throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `${what}: ${String(v)}`);
}

/** A flat HGETALL array as [field, value] pairs. */
export function pairs(v: unknown, what: string): [string, string][] {
  if (!Array.isArray(v)) throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", what);
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < v.length; i += 2) out.push([str(v[i], what), str(v[i + 1], what)]);
  return out;
}

export interface LoanTuple {
  readonly units: number;
  readonly deadlineUs: number;
  readonly seq: number;
}

export function parseLoan(s: string): LoanTuple {
  const [u, d, q] = s.split(":");
  return { units: Number(u), deadlineUs: Number(d), seq: Number(q) };
}
