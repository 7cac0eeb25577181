// envoyproxy/ratelimit's YAML read as it is: its sample configs load unchanged, every one of
// its sixteen keys is understood, and whatever geoquota cannot enforce is refused by key
// name and file line (the same files as envoyproxy/ratelimit's own config tests use).
import { describe, expect, it } from "vitest";
import {
  EnvoyConfigError,
  loadEnvoyConfigFile,
  loadEnvoyConfigs,
  parseEnvoyConfig,
  RuleSet,
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
