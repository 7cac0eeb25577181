// Keys written in the layout before issue 24 (P:b one text field per number, %.17g; the CRDT
// counters in P:c) are read exactly and converted on their first write (lib/keep.lua
// convert_legacy): an upgrade that stops a region's old processes and starts the new ones keeps
// every bucket's level, refund record, window, log and counter. Each case writes the old fields as
// the old scripts did, then a check (and a refund) on the new scripts must equal the model fed the
// same old state at the scripts' TIME; afterwards P:b holds the new layout only and P:c is gone.
import * as lease from "@geoquota/core";
import type { Algorithm, KeyPolicy } from "@geoquota/core";
import { bucketVersion } from "@geoquota/core";
import { keyLimit, keyNames } from "@geoquota/redis";
import { describe, expect, it } from "vitest";
import { freshRegionPerFile, policy, readRecord, receiptRef, TIMING } from "./redis-helpers.js";

const fx = freshRegionPerFile();

const idOf = (marker: string) => marker.slice(0, marker.indexOf(":"));

async function nowUs(): Promise<number> {
  const [s, u] = await fx.redis.time();
  return Number(s) * 1e6 + Number(u);
}

function modelRegion(): lease.RegionState {
  return { region: "eu", marker: fx.setup.marker };
}

/** Writes P:b's old fields and P:c's counters as the scripts before issue 24 did. */
async function writeOld(p: KeyPolicy, b: Record<string, string | number>, c: Record<string, number>) {
  const [kb, kc] = keyNames(p.tenant, p.resource);
  if (Object.keys(b).length > 0) await fx.redis.hset(kb as string, b);
  if (Object.keys(c).length > 0) await fx.redis.hset(kc as string, c);
}

async function expectConverted(p: KeyPolicy, namedCounters: string[]) {
  const [kb, kc] = keyNames(p.tenant, p.resource);
  expect(await fx.redis.exists(kc as string), "P:c folded into P:b").toBe(0);
  const fields = (await fx.redis.hkeys(kb as string)).sort();
  const state = lease.isRateAlgorithm(p.limit.algorithm)
    ? ["v"]
    : p.limit.algorithm === "sliding_log"
      ? ["q"]
      : ["w"];
  expect(fields).toEqual(["c", ...state, ...namedCounters].sort());
}

const counterSets = (admitted: Record<string, number>, denied: Record<string, number> = {}) => ({
  admitted,
  refunded: {},
  denied,
});

describe("a key of the layout before issue 24", () => {
  for (const algorithm of ["token_bucket", "gcra"] as Algorithm[]) {
    it(`${algorithm}: level, schedule, refund record and counters carry over exactly`, async () => {
      const p = policy({ algorithm, capacity: 10, refillPerSecond: 2 }, { base: 600_000 });
      const marker = fx.setup.marker;
      const me = `eu.${idOf(marker)}`;
      const ts = (await nowUs()) - 400_000;
      // A share rise 100 ms after ts (a loan received), and a refund record of two entries.
      const sx = [ts + 100_000, 700_000, 0];
      const value = algorithm === "gcra" ? ts + 1_250_000.5 : 3.25;
      await writeOld(
        p,
        {
          [algorithm === "gcra" ? "ta" : "tk"]: String(value),
          ts: String(ts),
          inc: marker,
          s: "600000",
          o: "0",
          sx: sx.join(","),
          pv: bucketVersion(keyLimit(p), TIMING),
          rf: "300000,500,2,2750",
          xe: String(ts + 1e9),
          dg: "0",
          de: String(ts + 1e9),
        },
        { [`p|${me}`]: 7, [`d|${me}`]: 2, "p|us.1700000000000001": 5 },
      );
      const region = modelRegion();
      const key = lease.emptyKeyState();
      key.bucket = {
        value,
        tsUs: ts,
        inc: marker,
        pv: bucketVersion(keyLimit(p), TIMING),
        schedule: {
          share: 600_000,
          outstanding: 0,
          next: [{ atUs: sx[0]!, share: 700_000, outstanding: 0 }],
        },
        refunds: [ts - 300_000, 500, ts - 2, 2750],
      };
      const limit = keyLimit(p);
      const got = await fx.setup.store.check(p, 1);
      const want = lease.check(region, key, limit, TIMING, 1, got.nowUs);
      expect([got.allowed, got.tokens, got.share, got.capacity]).toEqual([
        want.allowed,
        want.remaining,
        want.share,
        want.capacity,
      ]);
      await expectConverted(p, ["p|us.1700000000000001"]);
      // The refund record came over too: a refund of that admission erases it as the model does.
      const r = await fx.setup.store.refund(p, 1, receiptRef(got.nowUs));
      expect(r.refunded).toBe(true);
      if (!r.refunded) return;
      const wantR = lease.refund(region, key, limit, TIMING, 1, got.nowUs, r.decision.nowUs);
      expect(r.decision.tokens).toBe(wantR.remaining);
      expect((await fx.setup.store.inspect(p)).counters).toEqual({
        admitted: { [me]: 8, "us.1700000000000001": 5 },
        refunded: { [me]: 1 },
        denied: { [me]: 2 },
      });
    });
  }

  it("token_bucket stored under an older policy: the level carried over at the old C and r", async () => {
    const old = policy({ capacity: 10, refillPerSecond: 2 }, { base: 1_000_000 });
    const p: KeyPolicy = { ...old, limit: { ...old.limit, capacity: 20, refillPerSecond: 5 } };
    const ts = (await nowUs()) - 300_000;
    await writeOld(
      p,
      {
        tk: "4.5",
        ts: String(ts),
        inc: fx.setup.marker,
        s: "1000000",
        o: "0",
        sx: "",
        pv: bucketVersion(keyLimit(old), TIMING),
        rf: "1,0",
      },
      {},
    );
    const key = lease.emptyKeyState();
    key.bucket = {
      value: 4.5,
      tsUs: ts,
      inc: fx.setup.marker,
      pv: bucketVersion(keyLimit(old), TIMING),
      schedule: { share: 1_000_000, outstanding: 0, next: [] },
      refunds: [ts - 1, 0],
    };
    const got = await fx.setup.store.check(p, 1);
    const want = lease.check(modelRegion(), key, keyLimit(p), TIMING, 1, got.nowUs);
    expect([got.allowed, got.tokens]).toEqual([want.allowed, want.remaining]);
    await expectConverted(p, []);
  });

  it("a bucket of another incarnation: discarded; its own counters kept as that replica's", async () => {
    const p = policy({ capacity: 10, refillPerSecond: 2 });
    const ts = (await nowUs()) - 300_000;
    await writeOld(
      p,
      {
        tk: "1",
        ts: String(ts),
        inc: "1600000000000000:1600000000000000",
        s: "1000000",
        o: "0",
        sx: "",
        pv: "x",
      },
      { "p|eu.1600000000000000": 9 },
    );
    const key = lease.emptyKeyState();
    key.bucket = {
      value: 1,
      tsUs: ts,
      inc: "1600000000000000:1600000000000000",
      pv: "x",
      schedule: { share: 1_000_000, outstanding: 0, next: [] },
      refunds: [ts, 0],
    };
    const got = await fx.setup.store.check(p, 1);
    const want = lease.check(modelRegion(), key, keyLimit(p), TIMING, 1, got.nowUs);
    expect([got.allowed, got.tokens]).toEqual([want.allowed, want.remaining]);
    await expectConverted(p, ["p|eu.1600000000000000"]);
    expect((await fx.setup.store.inspect(p)).counters).toEqual(
      counterSets({ "eu.1600000000000000": 9, [`eu.${idOf(fx.setup.marker)}`]: 1 }),
    );
  });

  it("counters without a bucket (a denial on a missing bucket wrote only P:c)", async () => {
    const p = policy({ capacity: 10, refillPerSecond: 2 });
    const me = `eu.${idOf(fx.setup.marker)}`;
    await writeOld(p, {}, { [`d|${me}`]: 3, "d|us.1": 4 });
    await fx.setup.store.check(p, 1);
    await expectConverted(p, ["d|us.1"]);
    expect((await fx.setup.store.inspect(p)).counters).toEqual(
      counterSets({ [me]: 1 }, { [me]: 3, "us.1": 4 }),
    );
  });

  for (const algorithm of ["fixed_window", "sliding_window"] as Algorithm[]) {
    it(`${algorithm}: the window's counts carry over`, async () => {
      const p = policy({ algorithm, capacity: 10, refillPerSecond: 10, windowMs: 60_000 });
      const W = 60_000_000;
      const k = Math.floor((await nowUs()) / W);
      await writeOld(p, { inc: fx.setup.marker, w: String(k), n: "6.5", pn: "2" }, {});
      const key = lease.emptyKeyState();
      key.window = { inc: fx.setup.marker, window: k, count: 6.5, previous: 2 };
      const got = await fx.setup.store.check(p, 1);
      const want = lease.check(modelRegion(), key, keyLimit(p), TIMING, 1, got.nowUs);
      // (A check across a window boundary would compare other windows: equal all the same.)
      expect([got.allowed, got.tokens]).toEqual([want.allowed, want.remaining]);
      await expectConverted(p, []);
    });
  }

  it("sliding_log: the log and its member sequence carry over", async () => {
    const p = policy({ algorithm: "sliding_log", capacity: 5, refillPerSecond: 5, windowMs: 60_000 });
    const t = (await nowUs()) - 1_000_000;
    const [, , , , kz] = keyNames(p.tenant, p.resource);
    await writeOld(p, { inc: fx.setup.marker, q: "3" }, {});
    await fx.redis.zadd(kz as string, String(t), "2:1", String(t + 1), "3:2.5");
    const key = lease.emptyKeyState();
    key.logInc = fx.setup.marker;
    key.logSeq = 3;
    key.log = [
      { scoreUs: t, member: "2:1" },
      { scoreUs: t + 1, member: "3:2.5" },
    ];
    const got = await fx.setup.store.check(p, 1);
    const want = lease.check(modelRegion(), key, keyLimit(p), TIMING, 1, got.nowUs);
    expect([got.allowed, got.tokens]).toEqual([want.allowed, want.remaining]);
    expect(await fx.redis.zrange(kz as string, "0", "-1")).toEqual(["2:1", "3:2.5", "4:1"]);
    await expectConverted(p, []);
    expect(((await readRecord(fx.redis, keyNames(p.tenant, p.resource)[0] as string)) ?? { p: 0 }).p).toBe(1);
  });

  it("inspect reads an old key without converting it", async () => {
    const p = policy({ capacity: 10, refillPerSecond: 2 });
    const me = `eu.${idOf(fx.setup.marker)}`;
    const ts = (await nowUs()) - 100_000;
    const old = {
      tk: "2",
      ts: String(ts),
      inc: fx.setup.marker,
      s: "1000000",
      o: "0",
      sx: "",
      pv: bucketVersion(keyLimit(p), TIMING),
      rf: "1,0",
    };
    await writeOld(p, old, { [`p|${me}`]: 4 });
    const v = await fx.setup.store.inspect(p);
    expect(v.counters).toEqual(counterSets({ [me]: 4 }));
    const [kb, kc] = keyNames(p.tenant, p.resource);
    expect(await fx.redis.hgetall(kb as string)).toEqual(old);
    expect(await fx.redis.hgetall(kc as string)).toEqual({ [`p|${me}`]: "4" });
  });
});
