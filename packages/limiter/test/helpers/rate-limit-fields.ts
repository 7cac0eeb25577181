// Parses a decision's RateLimit-Policy / RateLimit structured fields with the
// structured-headers library (not with our own serializer's assumptions) and
// checks them, and the legacy headers, against the JSON body.
import type { IncomingHttpHeaders } from "node:http";
import { type BareItem, parseList } from "structured-headers";
import { expect } from "vitest";

type Headers = IncomingHttpHeaders | Record<string, string | string[] | number | undefined>;

export interface ParsedItem {
  readonly name: BareItem;
  readonly params: ReadonlyMap<string, BareItem>;
}

function header(h: Headers, name: string): string {
  const v = h[name];
  if (typeof v !== "string") throw new Error(`missing header ${name}`);
  return v;
}

export function parseRateLimitFields(h: Headers): { policies: ParsedItem[]; limits: ParsedItem[] } {
  const items = (field: string) =>
    parseList(header(h, field)).map((member) => {
      if (Array.isArray(member[0])) throw new Error(`${field}: inner list where an item was expected`);
      return { name: member[0] as BareItem, params: member[1] };
    });
  return { policies: items("ratelimit-policy"), limits: items("ratelimit") };
}

export interface DecisionJson {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly scope: "region" | "process";
  readonly resetSeconds: number;
  readonly global: { readonly limit: number };
  readonly regional?: { readonly limit: number; readonly remaining: number } | undefined;
  readonly process?: { readonly limit: number; readonly remaining: number } | undefined;
}

/** Every header of a decision agrees with its body; returns the parsed fields. */
export function expectHeadersMatchBody(
  h: Headers,
  body: DecisionJson,
  expected: { readonly baseSlice?: number } = {},
) {
  const parsed = parseRateLimitFields(h);
  expect(Number.isInteger(body.remaining) && body.remaining >= 0).toBe(true);
  expect(Number.isInteger(body.limit)).toBe(true);
  expect(body.remaining).toBeLessThanOrEqual(body.limit);
  // One service limit, for the scope the body names.
  expect(parsed.limits).toHaveLength(1);
  const service = parsed.limits[0]!;
  expect(service.name).toBe(body.scope);
  expect(service.params.get("r")).toBe(body.remaining);
  const t = service.params.get("t");
  // Allowed: t is the reset; denied: t and every legacy reset are the Retry-After value.
  const reset = body.allowed ? Math.ceil(body.resetSeconds) : Number(header(h, "retry-after"));
  expect(t).toBe(reset);
  // Policies: the global C, and the scope's quota with the same partition key. The
  // region's quota is its base slice (stable while shares move: `expected.baseSlice`
  // when the caller knows it); a process's, its own capacity.
  expect(parsed.policies.map((p) => p.name)).toEqual(["global", body.scope]);
  const [global, scoped] = parsed.policies as [ParsedItem, ParsedItem];
  expect(global.params.get("q")).toBe(body.global.limit);
  if (body.scope === "process") expect(scoped.params.get("q")).toBe(body.limit);
  else if (expected.baseSlice !== undefined) expect(scoped.params.get("q")).toBe(expected.baseSlice);
  else expect(Number.isInteger(scoped.params.get("q"))).toBe(true);
  const pkOf = (x: { params: ReadonlyMap<string, BareItem> }) => {
    const v = x.params.get("pk");
    return v === undefined ? undefined : Buffer.from(v as ArrayBuffer).toString("hex");
  };
  expect(pkOf(global)).toBe(pkOf(scoped));
  expect(pkOf(service)).toBe(pkOf(scoped));
  // The legacy sets say the same numbers, for the same scope.
  for (const prefix of ["ratelimit", "x-ratelimit"]) {
    expect(header(h, `${prefix}-limit`)).toBe(String(body.limit));
    expect(header(h, `${prefix}-remaining`)).toBe(String(body.remaining));
    expect(header(h, `${prefix}-reset`)).toBe(String(reset));
  }
  expect(header(h, "x-ratelimit-scope")).toBe(body.scope);
  expect(body[body.scope === "region" ? "regional" : "process"]).toEqual({
    limit: body.limit,
    remaining: body.remaining,
  });
  expect(body[body.scope === "region" ? "process" : "regional"]).toBeUndefined();
  const raw = scoped.params.get("pk");
  return {
    ...parsed,
    service,
    global,
    scoped,
    /** The pk as text (partitionKey "raw"), undefined when omitted. */
    pk: raw === undefined ? undefined : Buffer.from(raw as ArrayBuffer).toString(),
    pkHex: pkOf(scoped),
  };
}
