// The durability certificate's sharing and reconnect rules (certificate.ts,
// DESIGN §4 "Durability certificates") on a scripted connection: which
// callers one WAIT answers, what a socket close does to them, and which
// replicas must have acknowledged. No Redis: the connection below records
// each pipeline and answers it when the test says so (the same rules on real
// Redis behind a switched proxy: packages/limiter/test/failover-one-address.int.test.ts).
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createCertifier, type Durability, probeKey } from "../src/index.js";

type Reply = [Error | null, unknown];

interface Sent {
  readonly commands: unknown[][];
  readonly answer: (replies: Reply[] | Error) => void;
}

/** A connection whose pipelines wait for the test to answer them. */
class ScriptedConnection extends EventEmitter {
  readonly options = { host: "scripted", port: 1 };
  readonly sent: Sent[] = [];
  pipeline() {
    const commands: unknown[][] = [];
    const add = (command: unknown[]) => {
      commands.push(command);
      return p;
    };
    const p = {
      set: (...a: unknown[]) => add(["set", ...a]),
      wait: (...a: unknown[]) => add(["wait", ...a]),
      role: () => add(["role"]),
      exec: () =>
        new Promise<Reply[]>((resolve, reject) => {
          this.sent.push({
            commands,
            answer: (r) => (r instanceof Error ? reject(r) : resolve(r)),
          });
        }),
    };
    return p;
  }
  asRedis(): Redis {
    return this as unknown as Redis;
  }
}

/** A master's answer: WAIT acked `acked`, ROLE lists `listed` connected replicas. */
function master(acked: number, listed: number): Reply[] {
  const replicas = Array.from({ length: listed }, (_, i) => ["127.0.0.1", String(7000 + i), "10"]);
  return [
    [null, "OK"],
    [null, acked],
    [null, ["master", 10, replicas]],
  ];
}

/** Lets the certifier's setImmediate flush run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Tracks whether a certificate promise has settled, and with what. */
function watch(p: Promise<Durability>): { readonly value: Durability | undefined } {
  const box: { value: Durability | undefined } = { value: undefined };
  void p.then((d) => {
    box.value = d;
  });
  return box;
}

describe("durability certificate (certificate.ts)", () => {
  it("callers of one turn share one SET probe + WAIT + ROLE, sent after all of them called", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 50 });
    const tickets = [c.ticket(3), c.ticket(3), c.ticket(3)];
    const all = Promise.all(tickets.map((t) => c.certify(t)));
    expect(conn.sent).toHaveLength(0);
    await turn();
    expect(conn.sent).toHaveLength(1);
    expect(conn.sent[0]?.commands).toEqual([["set", probeKey(3), "1"], ["wait", 1, 50], ["role"]]);
    conn.sent[0]?.answer(master(1, 1));
    expect(await all).toEqual([
      { durable: true, acked: 1 },
      { durable: true, acked: 1 },
      { durable: true, acked: 1 },
    ]);
  });

  it("a caller arriving after a WAIT was sent never shares it: it gets a WAIT of its own", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 50 });
    const early = watch(c.certify(c.ticket(0)));
    await turn();
    expect(conn.sent).toHaveLength(1);
    // Its write replied after the first WAIT went out: that WAIT does not cover it.
    const late = watch(c.certify(c.ticket(0)));
    conn.sent[0]?.answer(master(1, 1));
    await turn();
    expect(early.value).toEqual({ durable: true, acked: 1 });
    expect(late.value).toBeUndefined();
    expect(conn.sent).toHaveLength(2);
    // The later WAIT finds the replica gone: only the late caller is refused.
    conn.sent[1]?.answer(master(0, 0));
    await turn();
    expect(late.value).toEqual({ durable: false, acked: 0 });
  });

  it("a socket close between the write and the WAIT's answer voids the certificate of every caller before it", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 50 });
    const before = c.ticket(0);
    const p = c.certify(before);
    await turn();
    // The connection reconnects (a failover behind one address) before the answer:
    // the WAIT's answer comes from whatever server the new socket reaches.
    conn.emit("close");
    conn.sent[0]?.answer(master(1, 1));
    expect(await p).toEqual({ durable: false, acked: 1 });
    // A write issued after the reconnect is certified by a WAIT on the new socket.
    const after = c.certify(c.ticket(0));
    await turn();
    conn.sent[1]?.answer(master(1, 1));
    expect(await after).toEqual({ durable: true, acked: 1 });
  });

  it("a write issued before a close certifies nothing and costs no WAIT; a resent write neither", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 50 });
    const t = c.ticket(0);
    conn.emit("close"); // the reply came on the next socket (ioredis resent it)
    expect(await c.certify(t)).toEqual({ durable: false, acked: 0 });
    await turn();
    expect(conn.sent).toHaveLength(0);
  });

  it("acknowledged by every connected replica, not only the configured number; the next WAIT asks for all of them", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 50 });
    const first = c.certify(c.ticket(0));
    await turn();
    // WAIT 1 returned once one replica acked; ROLE lists a second, lagging one.
    conn.sent[0]?.answer(master(1, 2));
    expect(await first).toEqual({ durable: false, acked: 1 });
    const second = c.certify(c.ticket(0));
    await turn();
    expect(conn.sent[1]?.commands[1]).toEqual(["wait", 2, 50]);
    conn.sent[1]?.answer(master(2, 2));
    expect(await second).toEqual({ durable: true, acked: 2 });
  });

  it("fewer than the configured replicas, a server that is no master, or a failed pipeline: not durable (never rejects)", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 2, timeoutMs: 50 });
    const answers: (Reply[] | Error)[] = [
      master(1, 1),
      [
        [null, "OK"],
        [null, 2],
        [null, ["slave", "127.0.0.1", 7000, "connected", 10]],
      ],
      [
        [new Error("READONLY You can't write against a read only replica."), null],
        [null, 2],
        [null, ["master", 10, []]],
      ],
      new Error("Connection is closed."),
    ];
    for (const [i, a] of answers.entries()) {
      const p = c.certify(c.ticket(0));
      await turn();
      conn.sent[i]?.answer(a);
      expect((await p).durable).toBe(false);
    }
  });

  it("without replicas every certificate is granted at once and nothing is sent", async () => {
    const conn = new ScriptedConnection();
    const c = createCertifier(conn.asRedis(), { replicas: 0, timeoutMs: 50 });
    expect(await c.certify(c.ticket(0))).toEqual({ durable: true, acked: 0 });
    await turn();
    expect(conn.sent).toHaveLength(0);
  });

  it("refuses a WAIT timeout of 0 (it would block forever) and negative replicas", () => {
    const conn = new ScriptedConnection();
    expect(() => createCertifier(conn.asRedis(), { replicas: 1, timeoutMs: 0 })).toThrow(/timeout/);
    expect(() => createCertifier(conn.asRedis(), { replicas: -1, timeoutMs: 5 })).toThrow(/replicas/);
  });
});
