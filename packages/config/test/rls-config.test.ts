// The region config's `rls` block (the Envoy RLS listener, off when absent) and the limits
// key names state (key-limits.ts): what every process derives from the name alone.
import { describe, expect, it } from "vitest";
import {
  keyLimitResource,
  keyLimitSpec,
  lookupPolicy,
  parsePolicies,
  parseRegionConfig,
} from "../src/index.js";

const base = {
  region: "a",
  listen: { host: "127.0.0.1", port: 7101 },
  redis: { url: "redis://127.0.0.1:6379" },
  regions: [{ id: "a", gossip: "127.0.0.1:7201" }],
  gossip: { listen: { host: "127.0.0.1", port: 7201 }, plaintext: true },
  sharedSecret: "test-shared-secret-0123456789",
  adminToken: "test-admin-token-0123456789",
};
const parse = (extra: Record<string, unknown>) =>
  parseRegionConfig({ ...base, ...extra }, { file: "a.json", baseDir: "/etc/gq", env: {} });

describe("region config rls", () => {
  it("is off by default; on, its configs resolve against the config's directory", () => {
    expect(parse({}).rls).toBeUndefined();
    const c = parse({ rls: { listen: { host: "127.0.0.1", port: 8081 }, configs: ["rl/config.yaml"] } });
    expect(c.rls).toEqual({
      listen: { host: "127.0.0.1", port: 8081 },
      configs: ["/etc/gq/rl/config.yaml"],
      algorithm: "fixed_window",
      domain: "geoquota",
    });
  });

  it("refuses, naming the field: burst without the token bucket, the limiter's port, an unknown field", () => {
    expect(() => parse({ rls: { listen: { host: "127.0.0.1", port: 8081 }, burst: 5 } })).toThrow(
      /rls\.burst.*token_bucket only/,
    );
    expect(() => parse({ rls: { listen: { host: "127.0.0.1", port: 7101 } } })).toThrow(
      /rls\.listen\.port.*limiter's port/,
    );
    expect(() => parse({ rls: { listen: { host: "127.0.0.1", port: 8081 }, domian: "x" } })).toThrow(
      /rls.*domian/,
    );
  });
});

describe("region config rls.rlqs", () => {
  const tb = { listen: { host: "127.0.0.1", port: 8081 }, algorithm: "token_bucket" };
  it("is off by default; present, it mounts with its defaults", () => {
    expect(parse({ rls: tb }).rls?.rlqs).toBeUndefined();
    expect(parse({ rls: { ...tb, rlqs: {} } }).rls?.rlqs).toEqual({
      assignmentTtlMs: 2000,
      deliveryMarginMs: 250,
      renewBeforeMs: 500,
      assignmentFraction: 0.5,
      bucketsPerStreamMax: 1000,
      silentAfterMs: 3000,
    });
  });

  it("refuses, naming the field: the fixed window, a fraction above the slice, a renewal after the TTL, a TTL past D", () => {
    expect(() => parse({ rls: { ...tb, algorithm: "fixed_window", rlqs: {} } })).toThrow(
      /rls\.rlqs.*"algorithm": "token_bucket"/,
    );
    expect(() => parse({ rls: { ...tb, rlqs: { assignmentFraction: 1.5 } } })).toThrow(
      /rls\.rlqs\.assignmentFraction.*≤ 1/,
    );
    expect(() => parse({ rls: { ...tb, rlqs: { assignmentTtlMs: 500, renewBeforeMs: 500 } } })).toThrow(
      /rls\.rlqs\.renewBeforeMs.*< assignmentTtlMs/,
    );
    expect(() => parse({ rls: { ...tb, rlqs: { assignmentTtlMs: 2900, deliveryMarginMs: 200 } } })).toThrow(
      /rls\.rlqs\.assignmentTtlMs.*lease\.loanDurationMs \(D\) = 3000/,
    );
    expect(() => parse({ rls: { ...tb, rlqs: { ttlMs: 1 } } })).toThrow(/rls\.rlqs.*ttlMs/);
    expect(() => parse({ rls: { ...tb, rlqs: { silentAfterMs: 50 } } })).toThrow(/rls\.rlqs\.silentAfterMs/);
  });
});

describe("limits stated by key names", () => {
  it("a fixed window per unit, or a token bucket; the policy lookup takes it over the file", () => {
    const fw = keyLimitResource({ algorithm: "fw", requestsPerUnit: 20, unit: "minute" }, "ab".repeat(16));
    expect(keyLimitSpec(fw)).toEqual({
      algorithm: "fixed_window",
      capacity: 20,
      refillPerSecond: 20 / 60,
      windowMs: 60_000,
    });
    const tb = keyLimitResource(
      { algorithm: "tb", requestsPerUnit: 10, unit: "second", burst: 30, shadow: true },
      "cd".repeat(16),
    );
    expect(keyLimitSpec(tb)).toEqual({
      algorithm: "token_bucket",
      capacity: 30,
      refillPerSecond: 10,
      shadow: true,
    });
    const set = parsePolicies({ default: { capacity: 1, refillPerSecond: 1 } }, "p");
    expect(lookupPolicy(set, "any", fw).capacity).toBe(20);
    expect(keyLimitSpec("rls.fw.0.minute.abababababababab")).toBeUndefined();
    expect(keyLimitSpec("rls.fw.20.week2.abababababababab")).toBeUndefined();
    expect(lookupPolicy(set, "any", "rls.fw.0.minute.abababab").capacity).toBe(1);
  });
});
