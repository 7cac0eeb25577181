// The store guard's timeout measures the store, not this process: a reply that
// reached the socket in time is an answer even when the event loop looked late.
import { createSocket, type Socket } from "node:dgram";
import { once } from "node:events";
import type { Decision, KeyPolicy, RegionStore } from "@geoquota/core";
import { afterEach, describe, expect, it } from "vitest";
import { CircuitBreaker } from "../src/breaker.js";
import { GuardedStore } from "../src/guarded-store.js";
import { FakeStore } from "./helpers/fake-store.js";

const POLICY: KeyPolicy = {
  tenant: "t",
  resource: "r",
  limit: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 1 },
  baseShare: 1_000_000,
  floorShare: 0,
};
const DECISION: Decision = {
  allowed: true,
  limit: 10,
  remaining: 9,
  resetSeconds: 1,
  retryAfterSeconds: 0,
  share: 1_000_000,
  nowUs: 1,
  recovering: false,
};
const BREAKER = { failureThreshold: 1, openMs: 1000, halfOpenProbes: 1, closeAfterSuccesses: 1 };

/** Blocks this thread for `ms` (a stalled event loop: GC pause, CPU starvation, a long callback). */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

let sockets: Socket[] = [];
afterEach(() => {
  for (const s of sockets) s.close();
  sockets = [];
});

/**
 * A store whose check is answered over a real socket: a UDP datagram to a
 * receiver of this process, sent synchronously by the call, so the answer
 * waits in the kernel for the event loop's next I/O phase however long this
 * thread is busy.
 */
async function socketStore(): Promise<RegionStore> {
  const receiver = createSocket("udp4");
  const sender = createSocket("udp4");
  sockets.push(receiver, sender);
  receiver.bind(0, "127.0.0.1");
  await once(receiver, "listening");
  sender.connect(receiver.address().port, "127.0.0.1");
  await once(sender, "connect");
  const inner = new FakeStore();
  return Object.assign(inner, {
    check: () =>
      new Promise<Decision>((resolve) => {
        receiver.once("message", () => resolve(DECISION));
        sender.send("answer");
      }),
  });
}

describe("GuardedStore timeout", () => {
  it("a reply that arrived while this process was stalled past the timeout is an answer, not a timeout", async () => {
    const breaker = new CircuitBreaker(BREAKER, () => performance.now());
    const kinds: string[] = [];
    const guarded = new GuardedStore(await socketStore(), breaker, {
      timeoutMs: 20,
      onError: (_op, kind) => kinds.push(kind),
    });
    const answer = guarded.check(POLICY, 1);
    // Let the send go out, then stall past the timeout: the reply is in the socket, the timer due.
    await new Promise<void>((r) => process.nextTick(r));
    stall(80);
    await expect(answer).resolves.toEqual(DECISION);
    expect(kinds).toEqual([]);
    expect(breaker.state).toBe("closed");
  });

  it("a store that does not answer still times out, within the timeout and one event-loop turn", async () => {
    const inner = new FakeStore();
    inner.hang = true;
    const kinds: string[] = [];
    const breaker = new CircuitBreaker(BREAKER, () => performance.now());
    const guarded = new GuardedStore(inner, breaker, {
      timeoutMs: 20,
      onError: (_op, kind) => kinds.push(kind),
    });
    const t0 = performance.now();
    await expect(guarded.check(POLICY, 1)).rejects.toMatchObject({ code: "GQ_ERR_STORE_TIMEOUT" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(19);
    expect(kinds).toEqual(["timeout"]);
    expect(breaker.state).toBe("open");
  });
});
