// What geoquota enforces for each rule of envoyproxy/ratelimit configs
// (`geoquota policy import`): the rule's place in its file, its limit, and the
// geoquota policy its counters get (the spec stated by the key's name).
import { keyLimitResource, keyLimitSpec, type PolicySpec, type RlsUnit } from "@geoquota/config";
import type { EnvoyDescriptor, EnvoyDomain, EnvoyLimit } from "./envoy-config.js";

export interface RuleRow {
  readonly domain: string;
  /** `key_value.key2` as envoyproxy/ratelimit names it (a key alone: one counter per value). */
  readonly descriptor: string;
  readonly at: string;
  readonly limit: string;
  readonly name?: string;
  readonly replaces?: readonly string[];
  readonly shadow?: true;
  readonly quota?: true;
  readonly shareThreshold?: true;
  /** Absent for unlimited and for requests_per_unit 0 (always over). */
  readonly geoquota?: PolicySpec;
}

export interface TranslateOptions {
  readonly algorithm: "fixed_window" | "token_bucket";
  readonly burst?: number;
}

function specOf(l: EnvoyLimit, o: TranslateOptions): PolicySpec | undefined {
  if (l.unlimited || l.requestsPerUnit === 0) return undefined;
  const tb = o.algorithm === "token_bucket";
  const resource = keyLimitResource(
    {
      algorithm: tb ? "tb" : "fw",
      requestsPerUnit: l.requestsPerUnit,
      unit: l.unit.toLowerCase() as RlsUnit,
      ...(tb && o.burst !== undefined ? { burst: o.burst } : {}),
    },
    "0".repeat(32),
  );
  const spec = keyLimitSpec(resource);
  if (spec === undefined) throw new Error(`internal: no spec for ${resource}`);
  return spec;
}

export function translate(domains: readonly EnvoyDomain[], o: TranslateOptions): RuleRow[] {
  const rows: RuleRow[] = [];
  const walk = (domain: string, ds: readonly EnvoyDescriptor[], prefix: string, shared: boolean) => {
    for (const d of ds) {
      const name = d.value === "" ? d.key : `${d.key}_${d.value}`;
      const path = `${prefix}${name}`;
      const l = d.limit;
      if (l !== undefined) {
        const spec = specOf(l, o);
        rows.push({
          domain,
          descriptor: path,
          at: l.at,
          limit: l.unlimited ? "unlimited" : `${l.requestsPerUnit}/${l.unit}`,
          ...(l.name !== "" ? { name: l.name } : {}),
          ...(l.replaces.length > 0 ? { replaces: l.replaces } : {}),
          ...(l.shadow ? { shadow: true as const } : {}),
          ...(l.quota ? { quota: true as const } : {}),
          ...(shared || d.shareThreshold ? { shareThreshold: true as const } : {}),
          ...(spec !== undefined ? { geoquota: spec } : {}),
        });
      }
      walk(domain, d.children, `${path}.`, shared || d.shareThreshold);
    }
  };
  for (const d of domains) walk(d.domain, d.descriptors, "", false);
  return rows;
}
