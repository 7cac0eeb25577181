// envoyproxy/ratelimit's YAML read as it is: its sample configs load unchanged, every one of
// its sixteen keys is understood, and whatever geoquota cannot enforce is refused by key
// name and file line (the same files as envoyproxy/ratelimit's own config tests use).
import { readFileSync } from "node:fs";
import { repoRoot } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  checkRlqsFilterConfig,
  EnvoyConfigError,
  loadEnvoyConfigFile,
  loadEnvoyConfigs,
  parseEnvoyConfig,
  RLQS_FILTER_FIELDS,
  rlqsApi,
  RuleSet,
  rlqsFilterConfig,
  translate,
} from "../src/index.js";
import { FIXTURES } from "./harness.js";

const refused = (text: string): EnvoyConfigError => {
  try {
    parseEnvoyConfig(text, "t.yaml");
  } catch (err) {
    if (err instanceof EnvoyConfigError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
};

describe("envoyproxy/ratelimit configs", () => {
  it("its sample and test configs load unchanged", () => {
    const files = [
      "integration/basic.yaml",
      "integration/another.yaml",
      "examples/example.yaml",
      "examples/config.yaml",
      "config/basic_config.yaml",
      "config/wildcard.yaml",
      "config/shadowmode_config.yaml",
      "config/share_threshold.yaml",
    ];
    for (const f of files) expect(() => loadEnvoyConfigFile(`${FIXTURES}${f}`)).not.toThrow();
    const rows = translate(loadEnvoyConfigs(files.slice(0, 2).map((f) => `${FIXTURES}${f}`)), {
      algorithm: "fixed_window",
    });
    expect(rows.find((r) => r.domain === "basic" && r.descriptor === "key1")).toMatchObject({
      limit: "50/SECOND",
      geoquota: { algorithm: "fixed_window", capacity: 50, windowMs: 1000 },
    });
    const tb = translate(loadEnvoyConfigs([`${FIXTURES}integration/another.yaml`]), {
      algorithm: "token_bucket",
    });
    expect(tb.find((r) => r.descriptor === "key2")!.geoquota).toMatchObject({
      algorithm: "token_bucket",
      capacity: 20,
      refillPerSecond: 20 / 60,
    });
  });

  it("an unsupported key is refused with its name and line (its misspelled_key.yaml)", () => {
    expect(() => loadEnvoyConfigFile(`${FIXTURES}config/misspelled_key.yaml`)).toThrow(
      /misspelled_key\.yaml:5: unknown key 'ratelimit'/,
    );
    const e = refused(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n      burst: 5\n",
    );
    expect([e.line, e.reason]).toEqual([7, "unknown key 'burst'"]);
    expect(refused("domain: d\ndescriptors:\n  - key: a\n    unit: second\n").message).toMatch(
      /^t\.yaml:4: key 'unit' has no meaning in a descriptor/,
    );
  });

  it("its other refusals, each with a line: bad unit, unit with unlimited, self-replace, empty key, duplicates, WEEK", () => {
    expect(() => loadEnvoyConfigFile(`${FIXTURES}config/bad_limit_unit.yaml`)).toThrow(
      /bad_limit_unit\.yaml:\d+: invalid rate limit unit/,
    );
    expect(() => loadEnvoyConfigFile(`${FIXTURES}config/unlimited_with_unit.yaml`)).toThrow(
      /:\d+: should not specify rate limit unit when unlimited/,
    );
    expect(() => loadEnvoyConfigFile(`${FIXTURES}config/replaces_self.yaml`)).toThrow(
      /:\d+: replaces should not contain name of same descriptor/,
    );
    expect(refused("domain: d\ndescriptors:\n  - value: a\n").reason).toBe("descriptor has empty key");
    expect(refused("domain: d\ndescriptors:\n  - key: a\n  - key: a\n").message).toMatch(
      /^t\.yaml:4: duplicate descriptor composite key 'd\.a'/,
    );
    expect(
      refused("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: week, requests_per_unit: 1}\n")
        .reason,
    ).toMatch(/WEEK is not a unit/);
    expect(refused("descriptors: []\n").reason).toBe("config file cannot have empty domain");
    expect(
      refused("domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n").reason,
    ).toMatch(/share_threshold can only be used with wildcard/);
  });

  it("matches as envoyproxy/ratelimit does: key_value, then a wildcard, then the key alone; depth must match", () => {
    // Both files are domain test-domain (envoyproxy/ratelimit's tests load them one at a time too).
    const basic = new RuleSet(loadEnvoyConfigs([`${FIXTURES}config/basic_config.yaml`]));
    const wild = new RuleSet(loadEnvoyConfigs([`${FIXTURES}config/wildcard.yaml`]));
    const m = (domain: string, ...kv: [string, string][]) => {
      const rules = ["wild", "midWild", "multiWild", "nestedWild"].includes(kv[0]![0]) ? wild : basic;
      const r = rules.match(
        domain,
        kv.map(([key, value]) => ({ key, value })),
      );
      return r.kind === "limit" ? `${r.limit.requestsPerUnit}/${r.limit.unit}` : "none";
    };
    expect(m("test-domain", ["key1", "value1"], ["subkey1", "x"])).toBe("5/SECOND");
    expect(m("test-domain", ["key1", "value1"], ["subkey1", "subvalue1"])).toBe("10/SECOND");
    expect(m("test-domain", ["key1", "value1"])).toBe("none");
    expect(m("test-domain", ["key2", "value2"])).toBe("30/MINUTE");
    expect(m("test-domain", ["key2", "value3"])).toBe("none");
    expect(m("test-domain", ["key2", "other"])).toBe("20/MINUTE");
    expect(m("test-domain", ["key5", "value5"], ["subkey5", "subvalue5"])).toBe("25/DAY");
    expect(m("test-domain", ["key5", "value5"], ["subkey5", "subvalue5"], ["deeper", "x"])).toBe("none");
    expect(m("test-domain", ["wild", "foo123"])).toBe("20/MINUTE");
    expect(m("test-domain", ["wild", "bar"])).toBe("none");
    expect(m("test-domain", ["midWild", "barXYZb"])).toBe("20/MINUTE");
    expect(m("test-domain", ["multiWild", "foo1bar2baz"])).toBe("10/MINUTE");
    expect(m("test-domain", ["multiWild", "foo1baz2bar"])).toBe("none");
    expect(m("test-domain", ["nestedWild", "val1"], ["wild", "goo9"])).toBe("20/MINUTE");
  });

  it("a key without a value counts per value; share_threshold counts every value of its wildcard as one", () => {
    const rules = new RuleSet(loadEnvoyConfigs([`${FIXTURES}config/share_threshold.yaml`]));
    const id = (v: string) => {
      const r = rules.match("test-domain", [{ key: "files", value: v }]);
      return r.kind === "limit" ? r.counterId : "none";
    };
    expect(id("files/a.txt")).toBe(id("files/b.txt"));
    const plain = new RuleSet(loadEnvoyConfigs([`${FIXTURES}config/basic_config.yaml`]));
    const pid = (v: string) => {
      const r = plain.match("test-domain", [{ key: "key2", value: v }]);
      return r.kind === "limit" ? r.counterId : "none";
    };
    expect(pid("a")).not.toBe(pid("b"));
    expect(pid("a")).toBe(pid("a"));
  });
});

// Envoy's rate_limit_quota filter (issue 28 point 3): in the three states the region never
// sees (no bucket, no assignment yet, an expired assignment) the proxy must deny.
describe("Envoy's RLQS filter config", () => {
  const options = {
    cluster: "geoquota_rls",
    domain: "geoquota",
    headers: { tenant: "x-tenant-id", resource: "x-resource" },
    reportingIntervalMs: 500,
  };
  type Bucket = Record<string, { fallback_rate_limit?: { blanket_rule: string } } | string>;
  const bucketOf = (f: Record<string, unknown>): Bucket =>
    (
      f.typed_config as {
        bucket_matchers: { matcher_list: { matchers: { on_match: { action: { typed_config: Bucket } } }[] } };
      }
    ).bucket_matchers.matcher_list.matchers[0]!.on_match.action.typed_config;

  it("the generated filter denies with no assignment, on expiry and unmatched, never ALLOW_ALL; reports every > 100 ms", () => {
    const f = rlqsFilterConfig(options);
    expect(checkRlqsFilterConfig(f)).toEqual([]);
    const b = bucketOf(f);
    expect(b.no_assignment_behavior).toEqual({ fallback_rate_limit: { blanket_rule: "DENY_ALL" } });
    expect(b.expired_assignment_behavior).toEqual({ fallback_rate_limit: { blanket_rule: "DENY_ALL" } });
    expect(b.reporting_interval).toBe("0.5s");
    expect(JSON.stringify(f)).not.toContain("ALLOW_ALL");
    expect(JSON.stringify(f)).not.toContain("reuse_last_assignment");
    expect(() => rlqsFilterConfig({ ...options, reportingIntervalMs: 100 })).toThrow(/more than 100 ms/);
  });

  it("examples/envoy-rlqs/envoy.yaml is that filter and passes the same check", () => {
    const doc = parse(readFileSync(`${repoRoot}/examples/envoy-rlqs/envoy.yaml`, "utf8")) as {
      static_resources: {
        listeners: { filter_chains: { filters: { typed_config: { http_filters: unknown[] } }[] }[] }[];
      };
    };
    const filters =
      doc.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config.http_filters;
    const rlqs = filters.find((x) => (x as { name: string }).name === "envoy.filters.http.rate_limit_quota");
    expect(checkRlqsFilterConfig(rlqs)).toEqual([]);
    expect(rlqs).toEqual(rlqsFilterConfig(options));
  });

  it("refuses what lets a proxy admit outside the bound: the defaults, ALLOW_ALL, reuse_last_assignment, 100 ms, no on_no_match", () => {
    const edit = (change: (b: Bucket, f: Record<string, unknown>) => void): string[] => {
      const f = rlqsFilterConfig(options);
      change(bucketOf(f), f);
      return checkRlqsFilterConfig(f);
    };
    expect(edit((b) => delete b.no_assignment_behavior).join()).toMatch(
      /no_assignment_behavior: not set .*allows all/,
    );
    expect(edit((b) => delete b.expired_assignment_behavior).join()).toMatch(
      /expired_assignment_behavior: not set/,
    );
    expect(
      edit((b) => {
        b.expired_assignment_behavior = { fallback_rate_limit: { blanket_rule: "ALLOW_ALL" } };
      }).join(),
    ).toMatch(
      /expired_assignment_behavior: fallback_rate_limit must be blanket_rule DENY_ALL, not ALLOW_ALL/,
    );
    expect(
      edit((b) => {
        (b as Record<string, unknown>).expired_assignment_behavior = { reuse_last_assignment: {} };
      }).join(),
    ).toMatch(/reuse_last_assignment spends an assignment whose reservation ended at TTL \+ margin/);
    expect(
      edit((b) => {
        b.reporting_interval = "0.1s";
      }).join(),
    ).toMatch(/reporting_interval: must be more than 100 ms/);
    expect(
      edit((_b, f) => {
        delete (f.typed_config as { bucket_matchers: Record<string, unknown> }).bucket_matchers.on_no_match;
      }).join(),
    ).toMatch(/on_no_match: missing/);
    expect(
      edit((b) => {
        (b as Record<string, unknown>).no_assignment_behaviour = {};
      }).join(),
    ).toMatch(/unknown field 'no_assignment_behaviour'/);
  });

  it("the fallback's RateLimitStrategy is Envoy's (envoy.type.v3 in the RLQS descriptor set); the filter's own fields are a list from its proto", () => {
    const def = rlqsApi().definition as unknown as Record<
      string,
      { type: { field: { name: string }[]; enumType: { name: string; value: { name: string }[] }[] } }
    >;
    const strategy = def["envoy.type.v3.RateLimitStrategy"]!.type;
    expect(strategy.field.map((f) => f.name)).toEqual(
      expect.arrayContaining(["blanket_rule", "token_bucket"]),
    );
    expect(strategy.enumType.find((e) => e.name === "BlanketRule")!.value.map((v) => v.name)).toEqual([
      "ALLOW_ALL",
      "DENY_ALL",
    ]);
    // rate_limit_quota.proto is not in the set (its matcher imports are not fetched): the list stands in.
    expect(
      def["envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings"],
    ).toBeUndefined();
    expect(RLQS_FILTER_FIELDS.ExpiredAssignmentBehavior).toContain("reuse_last_assignment");
  });
});
