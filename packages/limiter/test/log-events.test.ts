// The limiter's structured log events, captured through a destination stream:
// no request lines by default, Redis errors throttled with a suppressed count,
// breaker transitions, 5xx responses and policy changes.
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limiterApp } from "./helpers/app.js";
import { logLevelOf, ThrottledEvents } from "@geoquota/config";
import { RedisStoreError } from "@geoquota/redis";
import { ADMIN_TOKEN, manualClock, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

type Line = Record<string, unknown> & { level: number; msg: string };

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function setup(options: { logRequests?: boolean; level?: string } = {}) {
  // One region: an admin PUT applies in this process (with several static
  // regions it would be refused, issue 21).
  const lines: Line[] = [];
  const stream = { write: (s: string) => lines.push(JSON.parse(s) as Line) };
  const store = new FakeStore();
  const clock = manualClock();
  app = await limiterApp({
    store,
    // failureThreshold 3, openMs 1000: the breaker's transitions are driven by the manual clock.
    config: testConfig({
      breaker: { failureThreshold: 3, openMs: 1000, closeAfterSuccesses: 1 },
      regions: [{ id: "us-east", gossip: "127.0.0.1:7301" }],
    }),
    policies: testPolicies(),
    clock: clock.now,
    logger: { level: options.level ?? "info", stream },
    ...(options.logRequests !== undefined ? { logRequests: options.logRequests } : {}),
  });
  const events = (name: string) => lines.filter((l) => l.event === name);
  return { app, store, clock, lines, events };
}

const check = (a: FastifyInstance, tenant = "cust_ent_9942") =>
  a.inject({ method: "POST", url: "/v1/check", payload: { tenant, resource: "payments_checkout" } });

describe("limiter log events", () => {
  it("logs no request lines on the check path unless logRequests is set", async () => {
    const quiet = await setup();
    expect((await check(quiet.app)).statusCode).toBe(200);
    expect(quiet.lines).toEqual([]);
    await quiet.app.close();

    const chatty = await setup({ logRequests: true });
    await check(chatty.app);
    expect(chatty.lines.map((l) => l.msg)).toEqual(["incoming request", "request completed"]);
  });

  it("throttles Redis errors to one line per second per kind, with the suppressed count", async () => {
    const { app, store, clock, events } = await setup();
    store.failWith = new Error("ECONNREFUSED 127.0.0.1:6379");
    await check(app);
    await check(app);
    expect(events("redis_error")).toEqual([
      expect.objectContaining({
        event: "redis_error",
        kind: "check:error",
        op: "check",
        errorKind: "error",
        error: "ECONNREFUSED 127.0.0.1:6379",
        suppressed: 0,
        level: 40,
      }),
    ]);
    // The third failure opens the breaker; calls are then refused without Redis.
    await check(app);
    await check(app);
    await check(app);
    clock.advance(999);
    await check(app);
    expect(events("redis_error").map((l) => l.kind)).toEqual(["check:error", "check:breaker_open"]);
    clock.advance(1);
    await check(app);
    // At t=1000 the breaker is half-open and the probe fails against Redis
    // again: logged with the two failures suppressed at t=0.
    expect(events("redis_error").at(-1)).toMatchObject({ kind: "check:error", suppressed: 2 });
  });

  it("logs breaker transitions with from and to", async () => {
    const { app, store, clock, events } = await setup();
    store.failWith = new Error("down");
    for (let i = 0; i < 3; i++) await check(app);
    expect(events("breaker_state")).toEqual([
      expect.objectContaining({ from: "closed", to: "open", level: 40, msg: "redis breaker opened" }),
    ]);
    store.failWith = undefined;
    clock.advance(1000);
    await check(app);
    expect(events("breaker_state").map((l) => [l.from, l.to])).toEqual([
      ["closed", "open"],
      ["open", "half_open"],
      ["half_open", "closed"],
    ]);
  });

  it("logs 5xx responses with the error, and readiness failures", async () => {
    const { app, store, events } = await setup();
    store.failWith = new RedisStoreError("GQ_ERR_BAD_NAME", "planted bug");
    const res = await check(app);
    expect(res.statusCode).toBe(500);
    const [line] = events("http_5xx");
    expect(line).toMatchObject({
      status: 500,
      code: "GQ_ERR_INTERNAL",
      method: "POST",
      route: "/v1/check",
      level: 50,
      msg: "5xx response",
    });
    expect(line?.err).toMatchObject({ message: expect.stringContaining("planted bug") });

    store.failWith = new Error("down");
    expect((await app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);
    expect(events("http_5xx").at(-1)).toMatchObject({
      status: 503,
      route: "/readyz",
      code: "GQ_ERR_STORE_UNAVAILABLE",
    });
  });

  it("logs policy changes made through the admin API", async () => {
    const { app, events } = await setup();
    const res = await app.inject({
      method: "PUT",
      url: "/v1/policies/cust_new/payments_checkout",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 1 },
    });
    expect(res.statusCode).toBe(200);
    expect(events("policy_changed")).toEqual([
      expect.objectContaining({
        tenant: "cust_new",
        resource: "payments_checkout",
        spec: expect.objectContaining({ capacity: 10 }),
        level: 30,
      }),
    ]);
  });

  it("respects the level: warn drops info events", async () => {
    const { app, events } = await setup({ level: "warn" });
    await app.inject({
      method: "PUT",
      url: "/v1/policies/cust_new/payments_checkout",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 1 },
    });
    expect(events("policy_changed")).toEqual([]);
  });
});

describe("ThrottledEvents and LOG_LEVEL", () => {
  it("reports how many lines it suppressed per kind", () => {
    const out: object[] = [];
    const log = { error: () => {}, info: () => {}, warn: (o: object) => out.push(o) };
    let now = 0;
    const t = new ThrottledEvents(log, 1000, () => now);
    for (let i = 0; i < 5; i++) t.emit("warn", "redis_error", "a", {}, "x");
    t.emit("warn", "redis_error", "b", {}, "x");
    now = 1000;
    t.emit("warn", "redis_error", "a", {}, "x");
    expect(out).toEqual([
      { event: "redis_error", kind: "a", suppressed: 0 },
      { event: "redis_error", kind: "b", suppressed: 0 },
      { event: "redis_error", kind: "a", suppressed: 4 },
    ]);
  });

  it("LOG_LEVEL wins over the config and is validated", () => {
    expect(logLevelOf("info", {})).toBe("info");
    expect(logLevelOf("info", { LOG_LEVEL: "debug" })).toBe("debug");
    expect(() => logLevelOf("info", { LOG_LEVEL: "loud" })).toThrow(
      'environment: LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    );
  });
});
