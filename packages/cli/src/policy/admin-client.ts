// The admin API of one region's limiter, as `geoquota policy` uses it. Any
// region will do: a proposal made in one region reaches every region by gossip.
import { userInfo } from "node:os";
import { loadRegionConfig } from "@geoquota/config";
import { UsageError } from "../errors.js";

export interface AdminTarget {
  readonly url: string;
  readonly token: string;
}

export const TOKEN_ENV = "GEOQUOTA_ADMIN_TOKEN";
/** Who the audit records name (`X-Geoquota-Actor`): this, else the login name. */
export const ACTOR_ENV = "GEOQUOTA_ACTOR";

function actor(): string {
  const given = process.env[ACTOR_ENV];
  if (given !== undefined && given !== "") return given;
  try {
    return userInfo().username;
  } catch {
    return "unnamed";
  }
}

/** `--url` + `--token` (or GEOQUOTA_ADMIN_TOKEN), or `--config F` (its listen address and adminToken). */
export function adminTarget(opts: Record<string, unknown>): AdminTarget {
  const config = opts.config as string | undefined;
  const url = opts.url as string | undefined;
  if (config !== undefined && url !== undefined) throw new UsageError("give --url or --config, not both");
  if (config !== undefined) {
    const c = loadRegionConfig(config);
    const host = c.listen.host === "0.0.0.0" || c.listen.host === "::" ? "127.0.0.1" : c.listen.host;
    return { url: `http://${host.includes(":") ? `[${host}]` : host}:${c.listen.port}`, token: c.adminToken };
  }
  if (url === undefined) throw new UsageError("expected --url <region URL> or --config <region config>");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url: expected an http:// URL, got "${url}"`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new UsageError(`--url: expected an http:// or https:// URL, got "${url}"`);
  const token = (opts.token as string | undefined) ?? process.env[TOKEN_ENV];
  if (token === undefined || token === "")
    throw new UsageError(`expected --token <admin token> (or ${TOKEN_ENV}) with --url`);
  return { url: parsed.origin, token };
}

/** A refusal by the server (4xx/5xx): the message is the server's, naming the field. */
export class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** 400s are the caller's input: exit 2 like any bad flag or file. */
    readonly exitCode = status === 400 ? 2 : 1,
  ) {
    super(message);
  }
}

export async function adminCall(
  target: AdminTarget,
  method: "GET" | "PUT" | "POST" | "DELETE",
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(`${target.url}${path}`, {
      method,
      headers: {
        ...headers,
        authorization: `Bearer ${target.token}`,
        "x-geoquota-actor": actor(),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    throw new AdminError(0, `${method} ${target.url}${path}: ${(err as Error).message}`);
  }
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    throw new AdminError(res.status, `${method} ${path}: the server answered ${res.status} with non-JSON`);
  }
  if (res.status >= 400) {
    const msg = typeof parsed.message === "string" ? parsed.message : `HTTP ${res.status}`;
    throw new AdminError(res.status, `${method} ${path}: ${res.status} ${msg}`);
  }
  return { status: res.status, body: parsed };
}
