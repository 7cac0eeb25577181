import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  baseShares,
  ConfigError,
  defaultLeasedMaxBatch,
  deriveRefundSecret,
  loadPolicies,
  loadRegionConfig,
  parsePolicies,
  parsePolicySpec,
  parseRegionConfig,
  resolvePolicy,
  withPolicy,
} from "../src/index.js";

const regionsDir = new URL("../../../regions/", import.meta.url).pathname;
const ids = ["us-east", "eu-west", "ap-south"];

function good(): Record<string, unknown> {
  return {
    region: "us-east",
    listen: { host: "127.0.0.1", port: 7101 },
    redis: { url: "redis://127.0.0.1:6381" },
    regions: [
      { id: "us-east", gossip: "127.0.0.1:7201" },
      { id: "eu-west", gossip: "127.0.0.1:7202" },
    ],
    gossip: { listen: { host: "127.0.0.1", port: 7201 }, plaintext: true },
    sharedSecret: "0123456789abcdef-secret",
    adminToken: "0123456789abcdef-admin",
  };
}

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("region config", () => {
  it("loads the shipped region files with defaults applied", () => {
    for (const id of ids) {
      const c = loadRegionConfig(join(regionsDir, `${id}.json`), {});
      expect(c.region).toBe(id);
      expect(c.regions.map((r) => r.id)).toEqual(ids);
      expect(c.gossip.round).toEqual({ minMs: 200, maxMs: 500, fastMs: 50 });
      expect(c.lease).toEqual({ epsilonMs: 250, loanDurationMs: 3000 });
      expect(c.floorPpm).toBe(20_000);
      expect(c.redis.timeoutMs).toBe(50);
      expect(c.failMode).toBe("closed");
      expect(c.policiesPath).toBe(join(regionsDir, "policies.json"));
    }
    const ports = ids.flatMap((id) => {
      const c = loadRegionConfig(join(regionsDir, `${id}.json`), {});
      return [c.listen.port, c.gossip.listen.port];
    });
    expect(new Set(ports).size).toBe(ports.length);
  });

  it("applies defaults to a minimal file", () => {
    const c = parseRegionConfig(good(), { file: "x.json" });
    expect(c.breaker).toEqual({
      failureThreshold: 5,
      openMs: 1000,
      halfOpenProbes: 1,
      closeAfterSuccesses: 2,
    });
    expect(c.leased.batch).toBe(50);
    expect(c.leased.lowWater).toBe(10);
    // Rate sizing is the default (issue 24 point 4): up to 100 batches per acquire.
    expect(c.leased.maxBatch).toBe(5000);
    expect(c.keyHashSecret).toBeUndefined();
    expect(c.deniedStatus).toBe(429);
    expect(parseRegionConfig({ ...good(), deniedStatus: 200 }, { file: "x.json" }).deniedStatus).toBe(200);
  });

  it("names the file and the field path", () => {
    const raw = good();
    raw.gossip = {
      listen: { host: "127.0.0.1", port: 7201 },
      round: { minMs: 10, maxMs: 500 },
      plaintext: true,
    };
    const err = errorOf(() => parseRegionConfig(raw, { file: "regions/us-east.json" }));
    expect(err.message).toBe("regions/us-east.json: gossip.round.minMs: expected number ≥ 50");
    expect(err.code).toBe("GQ_ERR_CONFIG_INVALID");
  });

  it.each([
    [{ region: "nowhere" }, "region: region nowhere is not in regions[]"],
    [{ failMode: "maybe" }, "failMode:"],
    [{ deniedStatus: 403 }, "deniedStatus: expected 429 or 200"],
    [{ deniedStatus: "200" }, "deniedStatus: expected 429 or 200"],
    [{ redis: { url: "http://x" } }, "redis.url: expected redis:// or rediss:// URL"],
    [{ floorPpm: 600_000 }, "floorPpm: floor × 2 regions exceeds 1000000"],
    [{ lease: { epsilonMs: 250, loanDurationMs: 1000 } }, "lease.loanDurationMs: expected ≥"],
    [{ listen: { host: "127.0.0.1", port: 70000 } }, "listen.port: expected number ≤ 65535"],
    [{ sharedSecret: "short" }, "sharedSecret"],
    [{ unknownField: 1 }, "unknownField"],
    [{ leased: { batch: 5, lowWater: 10 } }, "leased.lowWater: expected lowWater < batch"],
    // Values that would silently turn a feature off are refused, naming the field.
    [
      { leased: { enabled: true, durationMs: 3001 } },
      "leased.durationMs: expected ≤ lease.loanDurationMs (D) = 3000: the store refuses longer leases",
    ],
    [
      { leased: { enabled: true }, lease: { epsilonMs: 250, loanDurationMs: 1500 } },
      "leased.durationMs: expected ≤ lease.loanDurationMs (D) = 1500",
    ],
    [{ leased: { marginMs: 0 } }, "leased.marginMs: expected number ≥ 1"],
    [
      { leased: { batch: 50, maxBatch: 49 } },
      "leased.maxBatch: expected maxBatch ≥ batch (maxBatch = batch keeps a fixed batch)",
    ],
    [{ leased: { maxBatch: 0 } }, "leased.maxBatch: expected number ≥ 1"],
    [{ leased: { maxBatch: 2_000_000 } }, "leased.maxBatch: expected number ≤ 1000000"],
    [{ leased: { maxBatch: 100.5 } }, "leased.maxBatch: expected integer in [1, 1000000]"],
    [{ lease: { epsilonMs: 0, loanDurationMs: 3000 } }, "lease.epsilonMs: expected number ≥ 1"],
    [{ refund: { windowMs: 0 } }, "refund.windowMs: expected number ≥ 100"],
    [{ refund: { secret: "short" } }, "refund.secret"],
    [{ refund: { windowMs: 1000, extra: 1 } }, `refund: Unrecognized key: "extra"`],
    [
      { redis: { url: "redis://127.0.0.1:6379", batch: { maxChecks: 1 } } },
      "redis.batch.maxChecks: expected number ≥ 2",
    ],
    [
      { redis: { url: "redis://127.0.0.1:6379", batch: { maxWaitUs: 0 } } },
      "redis.batch.maxWaitUs: expected number ≥ 50",
    ],
    [
      { redis: { url: "redis://127.0.0.1:6379", batch: { maxWaitUs: 0.5 } } },
      "redis.batch.maxWaitUs: expected integer in [50, 100000]",
    ],
    [
      { redis: { url: "redis://127.0.0.1:6379", batch: { waitUs: 500 } } },
      `redis.batch: Unrecognized key: "waitUs"`,
    ],
  ])("rejects %j", (patch, message) => {
    const err = errorOf(() => parseRegionConfig({ ...good(), ...patch }, { file: "f.json" }));
    expect(err.message).toContain(`f.json: `);
    expect(err.message).toContain(message);
  });

  it("micro-batching of checks: off when absent, defaults 64 checks and 500 µs", () => {
    const url = "redis://127.0.0.1:6379";
    expect(parseRegionConfig({ ...good(), redis: { url } }, { file: "f.json" }).redis.batch).toBeUndefined();
    const on = parseRegionConfig({ ...good(), redis: { url, batch: {} } }, { file: "f.json" });
    expect(on.redis.batch).toEqual({ maxChecks: 64, maxWaitUs: 500 });
  });

  it("leased.maxBatch: 100 × batch when absent (at most 1e6), as written otherwise", () => {
    const maxBatch = (leased: Record<string, unknown>) =>
      parseRegionConfig({ ...good(), leased }, { file: "f" }).leased.maxBatch;
    expect(maxBatch({ enabled: true })).toBe(5000);
    expect(maxBatch({ enabled: true, batch: 500, lowWater: 100 })).toBe(50_000);
    expect(maxBatch({ batch: 20_000 })).toBe(1_000_000);
    // Written as the batch: a fixed batch, as before sizing was the default.
    expect(maxBatch({ enabled: true, batch: 50, maxBatch: 50 })).toBe(50);
    expect(maxBatch({ enabled: true, maxBatch: 800 })).toBe(800);
    for (const batch of [1, 7, 10_000, 999_999, 1_000_000]) {
      expect(defaultLeasedMaxBatch(batch)).toBeGreaterThanOrEqual(batch);
      expect(defaultLeasedMaxBatch(batch)).toBeLessThanOrEqual(1_000_000);
    }
  });

  it("accepts a leased duration up to D, and any while leased mode is off", () => {
    const at = parseRegionConfig({ ...good(), leased: { enabled: true, durationMs: 3000 } }, { file: "f" });
    expect(at.leased.durationMs).toBe(3000);
    const off = parseRegionConfig({ ...good(), leased: { durationMs: 9000 } }, { file: "f" });
    expect(off.leased.enabled).toBe(false);
  });

  it("resolves the refund secret: derived from sharedSecret unless given", () => {
    const d = parseRegionConfig(good(), { file: "f" });
    expect(d.refund.windowMs).toBe(60_000);
    expect(d.refund.secret).toBe(deriveRefundSecret("0123456789abcdef-secret"));
    expect(d.refund.secret).not.toContain("0123456789abcdef-secret");
    const other = parseRegionConfig({ ...good(), sharedSecret: "another-shared-secret-0" }, { file: "f" });
    expect(other.refund.secret).not.toBe(d.refund.secret);
    const given = parseRegionConfig(
      { ...good(), refund: { secret: { env: "GQ_REFUND" }, windowMs: 5000 } },
      { file: "f", env: { GQ_REFUND: "r".repeat(16) } },
    );
    expect(given.refund).toEqual({ secret: "r".repeat(16), windowMs: 5000 });
    const err = errorOf(() =>
      parseRegionConfig({ ...good(), refund: { secret: { env: "GQ_REFUND" } } }, { file: "f", env: {} }),
    );
    expect(err.message).toBe("f: refund.secret: environment variable GQ_REFUND is not set");
  });

  it("rejects duplicate regions and endpoints", () => {
    const raw = good();
    raw.regions = [
      { id: "us-east", gossip: "127.0.0.1:7201" },
      { id: "us-east", gossip: "127.0.0.1:7201" },
    ];
    const err = errorOf(() => parseRegionConfig(raw, { file: "f.json" }));
    expect(err.message).toContain("regions[1].id: duplicate region id us-east");
    expect(err.message).toContain("regions[1].gossip: duplicate gossip endpoint");
  });

  it("resolves secrets from the environment and names a missing variable", () => {
    const raw = { ...good(), adminToken: { env: "GQ_ADMIN" }, keyHashSecret: { env: "GQ_HASH" } };
    const c = parseRegionConfig(raw, {
      file: "f.json",
      env: { GQ_ADMIN: "a".repeat(20), GQ_HASH: "h".repeat(16) },
    });
    expect(c.adminToken).toBe("a".repeat(20));
    expect(c.keyHashSecret).toBe("h".repeat(16));
    const err = errorOf(() => parseRegionConfig(raw, { file: "f.json", env: {} }));
    expect(err.message).toContain("f.json: adminToken: environment variable GQ_ADMIN is not set");
  });

  it("names the file on invalid JSON", () => {
    const dir = mkdtempSync(join(tmpdir(), "gq-config-"));
    const p = join(dir, "bad.json");
    writeFileSync(p, "{ nope");
    expect(errorOf(() => loadRegionConfig(p)).message).toContain(`${p}: (file): invalid JSON`);
  });
});

describe("policies", () => {
  const policies = loadPolicies(join(regionsDir, "policies.json"), ids);

  it("resolves the seed's tenants and falls back to the default", () => {
    const ent = resolvePolicy(policies, ids, "us-east", "cust_ent_9942", "payments_checkout");
    expect(ent.limit).toEqual({ algorithm: "token_bucket", capacity: 1000, refillPerSecond: 1000 / 60 });
    const free = resolvePolicy(policies, ids, "us-east", "cust_free_1018", "payments_checkout");
    expect(free.limit.capacity).toBe(10);
    expect(free.limit.refillPerSecond).toBe(10 / 60);
    const anon = resolvePolicy(policies, ids, "eu-west", "anonymous", "payments_checkout");
    expect(anon.limit.capacity).toBe(5);
    expect(anon.limit.refillPerSecond).toBe(5 / 60);
    const other = resolvePolicy(policies, ids, "eu-west", "someone", "other_resource");
    expect(other.limit.capacity).toBe(5);
  });

  it("splits equal base shares summing exactly to 1_000_000 with a deterministic remainder", () => {
    const shares = ids.map((id) => resolvePolicy(policies, ids, id, "x", "payments_checkout").baseShare);
    expect(shares.reduce((a, b) => a + b, 0)).toBe(1_000_000);
    // Sorted ids: ap-south, eu-west, us-east; the single remainder unit goes to the first.
    expect(shares).toEqual([333_333, 333_333, 333_334]);
    expect(baseShares(["us-east", "eu-west", "ap-south"])).toEqual(
      baseShares(["ap-south", "us-east", "eu-west"]),
    );
    expect(baseShares(["us-east", "eu-west", "ap-south"])["ap-south"]).toBe(333_334);
    const f = resolvePolicy(policies, ids, "us-east", "x", "payments_checkout");
    expect(f.floorShare).toBe(20_000);
  });

  it("weights always sum to exactly U (property)", () => {
    const cases: Record<string, number>[] = [
      { a: 0.6, b: 0.4 },
      { a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1 },
      { a: 0.1, b: 0.2, c: 0.3 },
      { a: 3, b: 0, c: 7 },
      { a: 1e-9, b: 1e9 },
    ];
    for (const w of cases) {
      const s = baseShares(Object.keys(w), w);
      expect(Object.values(s).reduce((x, y) => x + y, 0)).toBe(1_000_000);
      for (const v of Object.values(s)) expect(Number.isInteger(v)).toBe(true);
    }
    expect(baseShares(["a", "b"], { a: 0.6, b: 0.4 })).toEqual({ a: 600_000, b: 400_000 });
  });

  it("uses weights and a policy floor when given", () => {
    const set = withPolicy(policies, "t1", "r1", {
      algorithm: "token_bucket",
      capacity: 10,
      refillPerSecond: 1,
      weights: { "us-east": 2, "eu-west": 1, "ap-south": 1 },
      floorPpm: 100_000,
    });
    const p = resolvePolicy(set, ids, "us-east", "t1", "r1");
    expect(p.baseShare).toBe(500_000);
    expect(p.floorShare).toBe(100_000);
  });

  it("names the field of a bad policy", () => {
    const err = errorOf(() =>
      parsePolicies(
        {
          default: { capacity: 5, refillPerSecond: 1 },
          policies: [{ tenant: "t", resource: "r", capacity: -1, refillPerSecond: 1 }],
        },
        "regions/policies.json",
      ),
    );
    expect(err.message).toBe("regions/policies.json: policies[0].capacity: expected a finite number > 0");
  });

  it("rejects weights for unknown regions, window algorithms without windowMs, duplicates", () => {
    expect(
      parsePolicySpec({ capacity: 1, refillPerSecond: 1, weights: { mars: 1, "us-east": 1 } }, ids),
    ).toMatchObject({
      ok: false,
      issues: [expect.stringContaining("weights.mars: unknown region")],
    });
    expect(parsePolicySpec({ algorithm: "fixed_window", capacity: 1 })).toMatchObject({
      ok: false,
      issues: ["windowMs: expected windowMs for fixed_window"],
    });
    const w = parsePolicySpec({ algorithm: "fixed_window", capacity: 60, windowMs: 60_000 });
    expect(w).toMatchObject({ ok: true, spec: { refillPerSecond: 1 } });
    // Fields the algorithm would ignore, and a floor no region can keep (lending silently off).
    expect(parsePolicySpec({ capacity: 1, refillPerSecond: 1, windowMs: 1000 })).toMatchObject({
      ok: false,
      issues: ["windowMs: windowMs applies to window algorithms only; token_bucket refills continuously"],
    });
    expect(
      parsePolicySpec({ algorithm: "sliding_window", capacity: 1, windowMs: 1000, refillPerSecond: 5 }),
    ).toMatchObject({
      ok: false,
      issues: [
        "refillPerSecond: sliding_window admits capacity per windowMs; its refill is derived (capacity / windowMs)",
      ],
    });
    expect(
      parsePolicySpec({ algorithm: "gcra", capacity: 1, refillPerSecond: 1, floorPpm: 333_334 }, ids),
    ).toMatchObject({ ok: false, issues: ["floorPpm: floor × 3 regions exceeds 1000000"] });
    expect(
      parsePolicySpec({ algorithm: "gcra", capacity: 1, refillPerSecond: 1, floorPpm: 333_333 }, ids),
    ).toMatchObject({ ok: true });
    const dup = { tenant: "t", resource: "r", capacity: 1, refillPerSecond: 1 };
    const err = errorOf(() =>
      parsePolicies({ default: { capacity: 1, refillPerSecond: 1 }, policies: [dup, dup] }, "p.json"),
    );
    expect(err.message).toContain("p.json: policies[1]: duplicate policy for t/r");
  });
});
