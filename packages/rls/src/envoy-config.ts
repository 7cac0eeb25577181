// envoyproxy/ratelimit's YAML configuration, read as it is (DESIGN §11): the
// sixteen keys it accepts, nested descriptors, a key without a value (one
// counter per distinct value), `*` wildcards anywhere in a value, units SECOND…
// YEAR. Whatever geoquota cannot enforce as written is refused, naming the key
// and its line; nothing is silently dropped.
import { readFileSync } from "node:fs";
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node as YamlNode,
  type Pair,
  parseDocument,
  type YAMLMap,
} from "yaml";

/** Units of the Envoy API (rls.proto RateLimitResponse.RateLimit.Unit) with their seconds. */
export const UNIT_SECONDS = {
  SECOND: 1,
  MINUTE: 60,
  HOUR: 3600,
  DAY: 86_400,
  MONTH: 30 * 86_400,
  YEAR: 365 * 86_400,
} as const;
export type EnvoyUnit = keyof typeof UNIT_SECONDS;

/** The keys envoyproxy/ratelimit accepts (its config validKeys), each only where it means something. */
export const ENVOY_KEYS = [
  "domain",
  "key",
  "value",
  "descriptors",
  "rate_limit",
  "unit",
  "requests_per_unit",
  "unlimited",
  "shadow_mode",
  "quota_mode",
  "name",
  "replaces",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
] as const;

const ROOT_KEYS = new Set(["domain", "descriptors"]);
const DESCRIPTOR_KEYS = new Set([
  "key",
  "value",
  "descriptors",
  "rate_limit",
  "shadow_mode",
  "quota_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);
const RATE_LIMIT_KEYS = new Set(["unit", "requests_per_unit", "unlimited", "name", "replaces"]);
const REPLACES_KEYS = new Set(["name"]);

export interface EnvoyLimit {
  readonly requestsPerUnit: number;
  readonly unit: EnvoyUnit;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
  readonly shadow: boolean;
  /**
   * quota_mode: over its limit, it denies the request only when every quota-mode limit of
   * the request is over (envoyproxy/ratelimit's rule).
   */
  readonly quota: boolean;
  /** Where the rate_limit block is: `file:line`. */
  readonly at: string;
}

export interface EnvoyDescriptor {
  readonly key: string;
  /** Empty: the key alone (matches any value, one counter per value). */
  readonly value: string;
  readonly limit?: EnvoyLimit;
  /** One counter for every value the wildcard matches (instead of one per value). */
  readonly shareThreshold: boolean;
  readonly children: readonly EnvoyDescriptor[];
  readonly at: string;
}

export interface EnvoyDomain {
  readonly domain: string;
  readonly descriptors: readonly EnvoyDescriptor[];
  readonly file: string;
}

/** A config error: `file:line: message` (the key's own line). */
export class EnvoyConfigError extends Error {
  override readonly name = "EnvoyConfigError";
  constructor(
    readonly file: string,
    readonly line: number,
    readonly reason: string,
  ) {
    super(`${file}:${line}: ${reason}`);
  }
}

class Reader {
  constructor(
    readonly file: string,
    private readonly lines: LineCounter,
  ) {}

  line(node: { range?: [number, number, number] | null } | null | undefined): number {
    const offset = node?.range?.[0] ?? 0;
    return this.lines.linePos(offset).line;
  }

  fail(node: { range?: [number, number, number] | null } | null | undefined, reason: string): never {
    throw new EnvoyConfigError(this.file, this.line(node), reason);
  }

  at(node: { range?: [number, number, number] | null } | null | undefined): string {
    return `${this.file}:${this.line(node)}`;
  }

  /** The map's pairs by key, refusing keys that are not allowed here (by name and line). */
  pairs(map: YAMLMap, allowed: ReadonlySet<string>, where: string): Map<string, Pair<YamlNode, YamlNode>> {
    const out = new Map<string, Pair<YamlNode, YamlNode>>();
    for (const item of map.items as Pair<YamlNode, YamlNode>[]) {
      const k = item.key;
      if (!isScalar(k) || typeof k.value !== "string")
        this.fail(k ?? map, `config error, key is not of type string: ${String(k)}`);
      const name = k.value as string;
      if (!(ENVOY_KEYS as readonly string[]).includes(name)) this.fail(k, `unknown key '${name}'`);
      if (!allowed.has(name))
        this.fail(k, `key '${name}' has no meaning ${where} (allowed: ${[...allowed].join(", ")})`);
      if (out.has(name)) this.fail(k, `duplicate key '${name}'`);
      out.set(name, item);
    }
    return out;
  }

  string(p: Pair<YamlNode, YamlNode> | undefined, name: string): string | undefined {
    if (p === undefined || p.value === null || (isScalar(p.value) && p.value.value === null))
      return undefined;
    const v = p.value;
    // yaml.v2 decodes a scalar into a Go string field as written: `value: 123` is "123".
    if (!isScalar(v) || typeof v.value === "object")
      this.fail(p.key as YamlNode, `'${name}': expected a string`);
    return isScalar(v) && v.source !== undefined ? String(v.source) : String(v.value);
  }

  bool(p: Pair<YamlNode, YamlNode> | undefined, name: string): boolean {
    if (p === undefined || p.value === null) return false;
    const v = p.value;
    if (!isScalar(v) || typeof v.value !== "boolean")
      this.fail(p.key as YamlNode, `'${name}': expected true or false`);
    return v.value as boolean;
  }

  uint32(p: Pair<YamlNode, YamlNode> | undefined, name: string): number {
    if (p === undefined || p.value === null) return 0;
    const v = p.value;
    const n = isScalar(v) ? v.value : undefined;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 4_294_967_295) {
      this.fail(p.key as YamlNode, `'${name}': expected an integer in [0, 4294967295]`);
    }
    return n;
  }

  list(p: Pair<YamlNode, YamlNode> | undefined, name: string): YAMLMap[] {
    if (p === undefined || p.value === null || (isScalar(p.value) && p.value.value === null)) return [];
    const v = p.value;
    if (!isSeq(v)) this.fail(p.key as YamlNode, `'${name}': expected a list`);
    return v.items.map((e) => {
      if (!isMap(e))
        this.fail(
          (e as YamlNode) ?? v,
          `config error, yaml file contains list of type other than map: ${String(e)}`,
        );
      return e;
    });
  }
}

function readLimit(r: Reader, p: Pair<YamlNode, YamlNode>, shadow: boolean, quota: boolean): EnvoyLimit {
  if (!isMap(p.value)) r.fail(p.key as YamlNode, "'rate_limit': expected a map");
  const f = r.pairs(p.value, RATE_LIMIT_KEYS, "in a rate_limit");
  const unlimited = r.bool(f.get("unlimited"), "unlimited");
  const unitText = r.string(f.get("unit"), "unit");
  const unit = unitText?.toUpperCase();
  const known = unit !== undefined && unit in UNIT_SECONDS;
  if (unlimited && known)
    r.fail(f.get("unit")?.key as YamlNode, "should not specify rate limit unit when unlimited");
  if (!unlimited && !known) {
    const hint =
      unit === "WEEK"
        ? " (WEEK is not a unit of the Envoy API this server speaks: rls.proto has SECOND, MINUTE, HOUR, DAY, MONTH, YEAR)"
        : " (expected SECOND, MINUTE, HOUR, DAY, MONTH or YEAR)";
    r.fail(f.get("unit")?.key ?? p.key, `invalid rate limit unit '${unitText ?? ""}'${hint}`);
  }
  const name = r.string(f.get("name"), "name") ?? "";
  const replaces = r.list(f.get("replaces"), "replaces").map((m) => {
    const e = r.pairs(m, REPLACES_KEYS, "in a replaces entry");
    const n = r.string(e.get("name"), "name") ?? "";
    if (n === "") r.fail(m, "should not have an empty replaces entry");
    if (n === name) r.fail(m, "replaces should not contain name of same descriptor");
    return n;
  });
  return {
    requestsPerUnit: r.uint32(f.get("requests_per_unit"), "requests_per_unit"),
    unit: (known ? unit : "SECOND") as EnvoyUnit,
    unlimited,
    name,
    replaces,
    shadow,
    quota,
    at: r.at(p.key as YamlNode),
  };
}

function readDescriptors(r: Reader, maps: readonly YAMLMap[], parent: string): EnvoyDescriptor[] {
  const seen = new Set<string>();
  return maps.map((m) => {
    const f = r.pairs(m, DESCRIPTOR_KEYS, "in a descriptor");
    const key = r.string(f.get("key"), "key") ?? "";
    if (key === "") r.fail(f.get("key")?.key ?? m, "descriptor has empty key");
    const value = r.string(f.get("value"), "value") ?? "";
    const finalKey = value === "" ? key : `${key}_${value}`;
    if (seen.has(finalKey))
      r.fail(f.get("key")?.key ?? m, `duplicate descriptor composite key '${parent}${finalKey}'`);
    seen.add(finalKey);
    const quota = r.bool(f.get("quota_mode"), "quota_mode");
    const shareThreshold = r.bool(f.get("share_threshold"), "share_threshold");
    if (shareThreshold && !finalKey.includes("*")) {
      r.fail(
        f.get("share_threshold")?.key as YamlNode,
        `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`,
      );
    }
    // Metrics naming only (detailed_metric, value_to_metric) and response metadata: checked, not enforced.
    r.bool(f.get("detailed_metric"), "detailed_metric");
    r.bool(f.get("value_to_metric"), "value_to_metric");
    const md = f.get("metadata");
    if (md !== undefined && md.value !== null && !isMap(md.value))
      r.fail(md.key as YamlNode, "'metadata': expected a map");
    const shadow = r.bool(f.get("shadow_mode"), "shadow_mode");
    const rl = f.get("rate_limit");
    const limit = rl !== undefined && rl.value !== null ? readLimit(r, rl, shadow, quota) : undefined;
    const children = readDescriptors(r, r.list(f.get("descriptors"), "descriptors"), `${parent}${finalKey}.`);
    return {
      key,
      value,
      ...(limit !== undefined ? { limit } : {}),
      shareThreshold,
      children,
      at: r.at(m),
    };
  });
}

/** Parses one file's text (`file` names it in errors). */
export function parseEnvoyConfig(text: string, file: string): EnvoyDomain {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false });
  const r: Reader = new Reader(file, lines);
  const bad = doc.errors[0];
  if (bad !== undefined) {
    throw new EnvoyConfigError(
      file,
      lines.linePos(bad.pos[0]).line,
      `error loading config file: ${bad.message}`,
    );
  }
  const root = doc.contents;
  if (!isMap(root)) r.fail(root as YamlNode | null, "expected a map with 'domain' and 'descriptors'");
  const f = r.pairs(root, ROOT_KEYS, "at the top level");
  const domain = r.string(f.get("domain"), "domain") ?? "";
  if (domain === "") r.fail(f.get("domain")?.key ?? root, "config file cannot have empty domain");
  return {
    domain,
    descriptors: readDescriptors(r, r.list(f.get("descriptors"), "descriptors"), `${domain}.`),
    file,
  };
}

export function loadEnvoyConfigFile(path: string): EnvoyDomain {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new EnvoyConfigError(path, 0, `cannot read: ${(err as Error).message}`);
  }
  return parseEnvoyConfig(text, path);
}

/** Several files; a domain in two files is refused (envoyproxy/ratelimit's default, without MERGE_DOMAIN_CONFIG). */
export function loadEnvoyConfigs(paths: readonly string[]): EnvoyDomain[] {
  const out = new Map<string, EnvoyDomain>();
  for (const p of paths) {
    const d = loadEnvoyConfigFile(p);
    const first = out.get(d.domain);
    if (first !== undefined) {
      throw new EnvoyConfigError(
        p,
        1,
        `duplicate domain '${d.domain}' in config file (first in ${first.file})`,
      );
    }
    out.set(d.domain, d);
  }
  return [...out.values()];
}
