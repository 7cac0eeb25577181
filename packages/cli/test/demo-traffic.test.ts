import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { OUTCOME, RequestLog } from "../src/demo/request-log.js";
import { recentRates } from "../src/demo/series.js";
import { type CheckResult, httpCheckSender, TrafficGenerator } from "../src/demo/traffic.js";

const keys = [{ tenant: "t", resource: "r", capacity: 10, refillPerSecond: 1 }];
const ids = ["a", "b"];

/** Lets the answer callbacks (microtasks) run, as the event loop would between ticks. */
const settle = () => new Promise<void>((r) => setImmediate(r));

/** A sender whose answers the test releases by hand. */
function heldSender() {
  const waiting: Array<(r: CheckResult) => void> = [];
  return {
    waiting,
    send: (_region: number) => new Promise<CheckResult>((resolve) => waiting.push(resolve)),
    releaseAll(outcome: CheckResult["outcome"]) {
      for (const w of waiting.splice(0)) w({ outcome });
    },
  };
}

describe("TrafficGenerator (injected clock)", () => {
  it("sends at the configured rate per region, open loop, and records every answer", async () => {
    let t = 0;
    const log = new RequestLog(10_000);
    const s = heldSender();
    const g = new TrafficGenerator({ regionIds: ids, keys, log, send: s.send, now: () => t });
    g.setDemand([{ a: 100, b: 20 }]);
    for (let i = 0; i < 100; i++) {
      t += 10;
      g.tick();
      s.releaseAll(i % 2 === 0 ? OUTCOME.allowed : OUTCOME.denied);
      await settle();
    }
    expect(g.counters.shed).toBe(0);
    await g.stop();
    // 1 s at 100/s and 20/s (±1 for the fractional credit left over).
    expect(g.counters.sent).toBeGreaterThanOrEqual(119);
    expect(g.counters.sent).toBeLessThanOrEqual(120);
    expect(log.size).toBe(g.counters.sent);
    const byRegion = [0, 0];
    for (const r of log.records()) byRegion[r.region]! += 1;
    expect(byRegion[0]).toBeGreaterThanOrEqual(99);
    expect(byRegion[1]).toBeGreaterThanOrEqual(19);
    const rates = recentRates(log, 0, 2, t, 1000);
    expect(rates.admittedPerSec[0]! + rates.deniedPerSec[0]!).toBeGreaterThanOrEqual(99);
  });

  it("sheds over the in-flight cap instead of queueing (open loop), and stop waits for answers", async () => {
    let t = 0;
    const log = new RequestLog(10_000);
    const s = heldSender();
    const g = new TrafficGenerator({ regionIds: ids, keys, log, send: s.send, now: () => t, inFlightMax: 8 });
    g.setDemand([{ a: 100 }]);
    for (let i = 0; i < 50; i++) {
      t += 10;
      g.tick();
    }
    expect(g.counters.inFlight).toBe(8);
    expect(g.counters.shed).toBeGreaterThan(30);
    const stopped = g.stop();
    s.releaseAll(OUTCOME.allowed);
    await stopped;
    expect(log.size).toBe(8);
    expect(log.admissions(0)).toHaveLength(8);
  });

  it("never sends more than the log can record", async () => {
    let t = 0;
    const log = new RequestLog(5);
    const s = heldSender();
    const g = new TrafficGenerator({ regionIds: ids, keys, log, send: s.send, now: () => t });
    g.setDemand([{ a: 1000 }]);
    for (let i = 0; i < 10; i++) {
      t += 10;
      g.tick();
      s.releaseAll(OUTCOME.allowed);
      await settle();
    }
    await g.stop();
    expect(g.counters.sent).toBe(5);
    expect(log.full).toBe(true);
  });

  it("does not burst to catch up after a stalled event loop", () => {
    let t = 0;
    const log = new RequestLog(10_000);
    const s = heldSender();
    const g = new TrafficGenerator({ regionIds: ids, keys, log, send: s.send, now: () => t });
    g.setDemand([{ a: 100 }]);
    g.tick();
    t += 5000;
    g.tick();
    expect(g.counters.sent).toBeLessThanOrEqual(11);
  });
});

describe("httpCheckSender", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });

  it("maps 200/429 JSON to allowed/denied (200 with allowed: false too) and anything else to error, over keep-alive", async () => {
    let n = 0;
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const cost = (JSON.parse(body) as { cost: number }).cost;
        n++;
        const code = n === 1 || n === 3 ? 200 : n === 2 ? 429 : 500;
        res.writeHead(code, { "content-type": "application/json" });
        res.end(JSON.stringify({ allowed: n === 1, cost }));
      });
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as AddressInfo).port;
    const s = httpCheckSender([`http://127.0.0.1:${port}`]);
    const body = { tenant: "t", resource: "r", cost: 1 };
    expect(await s.send(0, body)).toEqual({ outcome: OUTCOME.allowed });
    expect(await s.send(0, body)).toEqual({ outcome: OUTCOME.denied });
    expect(await s.send(0, body)).toEqual({ outcome: OUTCOME.denied }); // deniedStatus 200
    expect(await s.send(0, body)).toEqual({ outcome: OUTCOME.error });
    expect(await s.send(7, body)).toEqual({ outcome: OUTCOME.error });
    await s.close();
  });

  it("refuses non-loopback targets", () => {
    expect(() => httpCheckSender(["http://10.0.0.1:80"])).toThrow(/loopback/);
  });
});
