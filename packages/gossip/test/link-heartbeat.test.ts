// The heartbeat verdict of one link (link.ts) on a loaded machine: a tick
// that fires late, because this process did not run (its event loop stalled),
// must not end a link whose peer did answer (the pong waits unread behind the
// timer); a peer that is really gone is still ended after a few ticks, late
// or on time.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { Link } from "../src/transport/link.js";
import { CloseTracker } from "../src/transport/socket.js";

class FakeWs extends EventEmitter {
  readonly OPEN = 1;
  readonly CONNECTING = 0;
  readyState = 1;
  pings = 0;
  terminated = false;
  bufferedAmount = 0;
  ping(): void {
    this.pings += 1;
  }
  terminate(): void {
    this.terminated = true;
    this.readyState = 3;
  }
  close(): void {
    this.readyState = 3;
  }
  send(): void {}
}

function link(heartbeatMs: number) {
  let t = 0;
  const ws = new FakeWs();
  // biome-ignore lint/suspicious/noExplicitAny: a stand-in for ws's WebSocket in a unit test
  const tracker = new CloseTracker(ws as any);
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const l = new Link(ws as any, tracker, heartbeatMs, () => t, {
    frame: () => {},
    rtt: () => {},
    closed: () => {},
  });
  return {
    ws,
    l,
    advance(ms: number) {
      t += ms;
    },
  };
}

describe("heartbeat under a stalled event loop", () => {
  it("a tick 20 periods late does not end a link whose peer answered every ping", () => {
    const { ws, l, advance } = link(20);
    for (let i = 0; i < 5; i++) {
      advance(20);
      l.tick();
      ws.emit("pong", Buffer.alloc(0));
    }
    advance(400); // the process did not run for 400 ms: the last pong is still unread
    l.tick();
    expect(ws.terminated).toBe(false);
    ws.emit("pong", Buffer.alloc(0)); // read right after the timer
    advance(20);
    l.tick();
    expect(ws.terminated).toBe(false);
  });

  it("a silent peer is ended after 3 periods when ticks come on time", () => {
    const { ws, l, advance } = link(20);
    for (let i = 0; i < 2; i++) {
      advance(20);
      l.tick();
    }
    expect(ws.terminated).toBe(false);
    advance(20);
    l.tick();
    expect(ws.terminated).toBe(true);
  });

  it("a silent peer is still ended when every tick is late", () => {
    const { ws, l, advance } = link(20);
    let ticks = 0;
    while (!ws.terminated && ticks < 10) {
      advance(200);
      l.tick();
      ticks += 1;
    }
    expect(ws.terminated).toBe(true);
    expect(ticks).toBeLessThanOrEqual(3);
  });
});
