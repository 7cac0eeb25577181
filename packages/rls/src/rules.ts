// Descriptor → limit, as envoyproxy/ratelimit looks a descriptor up (its
// config GetLimit): entry by entry down the domain's tree, `key_value` first,
// then a wildcard of that level, then the key alone; a limit applies only when
// it sits at the descriptor's last entry. A counter is one per distinct
// descriptor (every entry's key and value), except that entries matched by a
// `share_threshold` wildcard count under the pattern, so all their values share one.
import { createHash } from "node:crypto";
import { globMatch } from "@geoquota/config";
import type { EnvoyDescriptor, EnvoyDomain, EnvoyLimit } from "./envoy-config.js";
import type { RlsEntry } from "./protos.js";

interface Level {
  /** By `key_value`, or `key` for a descriptor without a value (wildcards too, by pattern). */
  readonly byKey: ReadonlyMap<string, RuleNode>;
  /** The level's `key_value` patterns with a `*`, in file order (the first that matches wins). */
  readonly wildcards: readonly string[];
}

interface RuleNode {
  readonly d: EnvoyDescriptor;
  readonly children: Level;
}

function levelOf(descriptors: readonly EnvoyDescriptor[]): Level {
  const byKey = new Map<string, RuleNode>();
  const wildcards: string[] = [];
  for (const d of descriptors) {
    const finalKey = d.value === "" ? d.key : `${d.key}_${d.value}`;
    byKey.set(finalKey, { d, children: levelOf(d.children) });
    if (finalKey.includes("*")) wildcards.push(finalKey);
  }
  return { byKey, wildcards };
}

/** What a descriptor matched. */
export type RuleMatch =
  | { readonly kind: "none" }
  | {
      readonly kind: "limit";
      readonly limit: EnvoyLimit;
      /** Tells this counter apart from every other of the domain (hex). */
      readonly counterId: string;
    };

export const NO_MATCH: RuleMatch = { kind: "none" };

/** The counter's id: a digest of the domain and every entry (share-threshold entries by their pattern). */
export function counterIdOf(domain: string, parts: readonly (readonly [string, string])[]): string {
  const h = createHash("sha256").update(domain);
  for (const [k, v] of parts) h.update(`\u0000${k}\u0000${v}`);
  return h.digest("hex").slice(0, 32);
}

export class RuleSet {
  private readonly domains: ReadonlyMap<string, Level>;

  constructor(configs: readonly EnvoyDomain[]) {
    this.domains = new Map(configs.map((c) => [c.domain, levelOf(c.descriptors)]));
  }

  hasDomain(domain: string): boolean {
    return this.domains.has(domain);
  }

  get domainNames(): readonly string[] {
    return [...this.domains.keys()];
  }

  match(domain: string, entries: readonly RlsEntry[]): RuleMatch {
    const root = this.domains.get(domain);
    if (root === undefined) return NO_MATCH;
    let level: Level = root;
    const parts: (readonly [string, string])[] = [];
    let found: EnvoyLimit | undefined;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as RlsEntry;
      const withValue = `${entry.key}_${entry.value}`;
      let next: RuleNode | undefined = level.byKey.get(withValue);
      let pattern: string | undefined;
      if (next === undefined) {
        pattern = level.wildcards.find((w) => globMatch(w, withValue));
        if (pattern !== undefined) next = level.byKey.get(pattern);
      }
      if (next === undefined) {
        pattern = undefined;
        next = level.byKey.get(entry.key);
      }
      // share_threshold: the counter is the pattern's (its value part, as envoyproxy/ratelimit keys it).
      const shared = pattern !== undefined && next?.d.shareThreshold === true ? pattern : undefined;
      parts.push([entry.key, shared !== undefined ? shared.slice(entry.key.length + 1) : entry.value]);
      if (next?.d.limit !== undefined && i === entries.length - 1) found = next.d.limit;
      if (next === undefined || next.children.byKey.size === 0) break;
      level = next.children;
    }
    if (found === undefined || parts.length !== entries.length) return NO_MATCH;
    return { kind: "limit", limit: found, counterId: counterIdOf(domain, parts) };
  }
}
