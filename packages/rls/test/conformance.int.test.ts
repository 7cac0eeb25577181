// envoyproxy/ratelimit's integration expectations (its test/integration/integration_test.go,
// testBasicBaseConfig and friends), ported as black-box cases against geoquota's RLS with its
// configs loaded unchanged (fixtures/envoyproxy-ratelimit, Apache-2.0, see NOTICE.md). Where
// it has modes, geoquota matches its StopCacheKeyIncrementWhenOverlimit flow: a denied
// request charges none of its limits.
import { randomInt } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RlsRig, startRig } from "./harness.js";

let rig: RlsRig;
beforeAll(async () => {
  rig = await startRig([
    "integration/basic.yaml",
    "integration/another.yaml",
    "config/shadowmode_config.yaml",
    "examples/example.yaml",
  ]);
});
afterAll(async () => {
  await rig?.stop();
});

const fresh = () => String(randomInt(1, 2 ** 47));
const limit = (requests_per_unit: number, unit: string, name = "") => ({ name, requests_per_unit, unit });

describe("envoyproxy/ratelimit integration expectations", () => {
  it("an unknown domain: OK, no limit", async () => {
    const r = await rig.call("foo", [{ entries: [["hello", "world"]] }], 1);
    expect(r.overall_code).toBe("OK");
    expect(r.statuses).toHaveLength(1);
    expect(r.statuses[0]).toMatchObject({ code: "OK", current_limit: null, limit_remaining: 0 });
  });

  it("basic: key1 50 per second, the first request leaves 49", async () => {
    const r = await rig.call("basic", [{ entries: [["key1", fresh()]] }], 1);
    expect(r.overall_code).toBe("OK");
    expect(r.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: limit(50, "SECOND"),
      limit_remaining: 49,
    });
    // An epoch-aligned one-second window: it ends within the second.
    expect(Number(r.statuses[0]!.duration_until_reset!.seconds)).toBe(1);
  });

  it("another: key2 20 per minute; the 21st to 25th requests are OVER_LIMIT", async () => {
    const v = fresh();
    for (let i = 0; i < 25; i++) {
      const r = await rig.call("another", [{ entries: [["key2", v]] }], 1);
      const over = i >= 20;
      expect(r.overall_code).toBe(over ? "OVER_LIMIT" : "OK");
      expect(r.statuses[0]).toMatchObject({
        code: over ? "OVER_LIMIT" : "OK",
        current_limit: limit(20, "MINUTE"),
        limit_remaining: over ? 0 : 20 - (i + 1),
      });
      // envoyproxy/ratelimit's duration: unit − now mod unit, in whole seconds.
      const s = Number(r.statuses[0]!.duration_until_reset!.seconds);
      expect(s).toBeGreaterThanOrEqual(1);
      expect(s).toBeLessThanOrEqual(60);
    }
  });

  it("two descriptors in one request: key2 20/min and key3 10/hour; key3 over from the 11th, key2 not charged then", async () => {
    const v = fresh();
    for (let i = 0; i < 15; i++) {
      const r = await rig.call("another", [{ entries: [["key2", v]] }, { entries: [["key3", v]] }], 1);
      const over = i >= 10;
      expect(r.overall_code).toBe(over ? "OVER_LIMIT" : "OK");
      expect(r.statuses[0]).toMatchObject({
        code: "OK",
        current_limit: limit(20, "MINUTE"),
        limit_remaining: over ? 10 : 20 - (i + 1),
      });
      expect(r.statuses[1]).toMatchObject({
        code: over ? "OVER_LIMIT" : "OK",
        current_limit: limit(10, "HOUR"),
        limit_remaining: over ? 0 : 10 - (i + 1),
      });
    }
  });

  it("a descriptor that matches no rule: OK without a limit, beside one that does", async () => {
    const r = await rig.call("basic", [{ entries: [["nope", "x"]] }, { entries: [["key1", fresh()]] }], 1);
    expect(r.overall_code).toBe("OK");
    expect(r.statuses[0]).toMatchObject({ code: "OK", current_limit: null, limit_remaining: 0 });
    expect(r.statuses[0]!.duration_until_reset).toBeNull();
    expect(r.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 49 });
  });

  it("shadow mode: over its limit the descriptor stays OK (key2 20/min shadow, key1/subkey1_subvalue1 10/s shadow)", async () => {
    const v = fresh();
    for (let i = 0; i < 22; i++) {
      const r = await rig.call("test-domain", [{ entries: [["key2", v]] }], 1);
      expect(r.overall_code).toBe("OK");
      expect(r.statuses[0]).toMatchObject({
        code: "OK",
        current_limit: limit(20, "MINUTE"),
        limit_remaining: i >= 20 ? 0 : 20 - (i + 1),
      });
    }
    // key2_value2 (30/min) is not in shadow mode.
    for (let i = 0; i < 31; i++) {
      const r = await rig.call("test-domain", [{ entries: [["key2", "value2"]] }], 1);
      expect(r.overall_code).toBe(i >= 30 ? "OVER_LIMIT" : "OK");
    }
  });

  it("replaces: bkthomps (1/min) is replaced by the matching category_account limit (4/min)", async () => {
    // Each run needs fresh counters: the rule's values are fixed, so run once per minute window only.
    const desc = [
      {
        entries: [
          ["foo", "x"],
          ["bar", "bkthomps"],
        ] as [string, string][],
      },
      { entries: [["category", "account"]] as [string, string][] },
    ];
    const first = await rig.call("rl", desc, 1);
    expect(first.statuses[0]).toMatchObject({ code: "OK", current_limit: null, limit_remaining: 0 });
    expect(first.statuses[1]).toMatchObject({ current_limit: limit(4, "MINUTE") });
    // Without the replacing limit, bkthomps applies: 1 per minute (the second request is over).
    const alone = [
      {
        entries: [
          ["foo", fresh()],
          ["bar", "bkthomps"],
        ] as [string, string][],
      },
    ];
    const a = await rig.call("rl", alone, 1);
    const b = await rig.call("rl", alone, 1);
    expect(a.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: limit(1, "MINUTE", "bkthomps"),
      limit_remaining: 0,
    });
    expect(b.overall_code).toBe("OVER_LIMIT");
  });

  it("unlimited: OK with limit_remaining 4294967295 and no current_limit", async () => {
    const r = await rig.call("rl", [{ entries: [["qux", fresh()]] }], 1);
    expect(r.overall_code).toBe("OK");
    expect(r.statuses[0]).toMatchObject({ code: "OK", current_limit: null, limit_remaining: 4_294_967_295 });
  });

  it("requests_per_unit 0 (bar_banned): every request is OVER_LIMIT", async () => {
    const r = await rig.call(
      "rl",
      [
        {
          entries: [
            ["foo", fresh()],
            ["bar", "banned"],
          ],
        },
      ],
      1,
    );
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[0]).toMatchObject({
      code: "OVER_LIMIT",
      current_limit: limit(0, "MINUTE", "banned_limit"),
    });
  });
});
