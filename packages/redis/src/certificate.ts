// Durability certificates (DESIGN §4 "Durability certificates"). `WAIT`
// covers the writes made on its own connection, on the server that
// connection reaches *now*. In production a failover usually keeps the
// address (a VIP, a DNS name, a proxy) and shows up only as a reconnect, so a
// `WAIT` answered after a reconnect is an answer of another server: it says
// nothing about a write the old one took. The rule:
//
//   A write (or a read whose records are then shipped) is durable only when a
//   `WAIT` answered on the SAME connection that carried it, with NO socket
//   close (reconnect) between the moment the write/read was issued and the
//   WAIT's answer; the WAIT was sent after the write/read replied, right
//   after a probe write on that connection (so its offset covers everything
//   the server had, whoever wrote it), on a server that answers `ROLE` as a
//   master, and acknowledged by at least `replicas` (configured) replicas AND
//   by every replica the master lists as connected when it answered.
//
// Mechanism: every node connection carries a socket generation, a counter
// bumped on each ioredis `close` event (attached the first time a ticket
// names the connection, i.e. before the first certified write is issued).
// Every socket after the first is opened after a close, so "no close between
// issue and answer" means "one socket carried the command, the probe and the
// WAIT". A `connect` is not counted separately: a command issued before the
// first connect (offline queue) goes out on the first socket, the one the
// WAIT then uses; one issued while reconnecting goes out on the next socket,
// and a WAIT on that socket does cover it (both ran on the same server). `ticket()` captures (connection, generation) right before the
// write is issued; `certify(ticket)` joins the connection's open batch, and
// one pipeline `SET probe`, `WAIT need timeout`, `ROLE` per connection and
// event-loop turn (setImmediate) answers every member of the batch. A member
// is durable only if the generation at the answer equals its ticket's. A
// batch is closed (no one joins it) before its pipeline is sent, so a caller
// never shares a WAIT sent before it called. A command that ioredis queued
// while disconnected (offline queue) or resent after a reconnect
// (`autoResendUnfulfilledCommands`, `maxRetriesPerRequest`, `reconnectOnError`)
// after it went out on a socket that closed crossed a close, so it certifies
// nothing — whatever the caller's client options. `need` = max(configured, connected replicas the last ROLE
// listed), so WAIT does not return as soon as the configured number acked.
//
// On a Redis Cluster the connection is the master node serving the slot (the
// same node object the cluster client sends the slot's commands to); the probe
// uses a key of that slot, so a node that no longer serves it answers MOVED and
// the batch certifies nothing.
import type { Redis } from "ioredis";
import { hashTagOf, isCluster, keySlot, type RedisClient, shardSlot, shardTag } from "./keys.js";

export interface Durability {
  /** The certificate rule holds (see the module comment). */
  readonly durable: boolean;
  /** Replicas that acknowledged (WAIT's reply; 0 when no WAIT answered or without replicas). */
  readonly acked: number;
}

/** Where a write or read is issued: a shard's keys (`{s<k>}`), or one key of its own (e.g. `gq:policy`). */
export type Place = number | { readonly key: string };

/** Captured right before a write or read is issued; `certify` it once the write replied. */
export interface Ticket {
  /** The connection the command goes out on (undefined: none known, e.g. a Cluster slot without master). */
  readonly node: Redis | undefined;
  /** Its socket generation when the command was issued. */
  readonly generation: number;
  /** A key the node serves, written right before the WAIT. */
  readonly probe: string;
}

/** Probe key of a shard: written right before each WAIT so that the WAIT covers every earlier write. */
export function probeKey(shard: number): string {
  return `gq:${shardTag(shard)}:w`;
}

/** Probe key in the same Cluster slot as `key`. */
function probeKeyOf(key: string): string {
  return `gq:{${hashTagOf(key)}}:w`;
}

const generations = new WeakMap<Redis, { n: number }>();

/**
 * The connection's socket generation: bumped on every `close` event. The
 * listener is attached the first time a connection is seen (shared by every
 * certifier of the process).
 */
export function socketGeneration(node: Redis): number {
  let g = generations.get(node);
  if (g === undefined) {
    const counter = { n: 0 };
    node.on("close", () => {
      counter.n += 1;
    });
    generations.set(node, counter);
    g = counter;
  }
  return g.n;
}

/** The connection serving `slot`: the client itself when standalone, the slot's master on a Cluster. */
function slotNode(redis: RedisClient, slot: number): Redis | undefined {
  if (!isCluster(redis)) return redis;
  const owner = redis.slots[slot]?.[0];
  return redis.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === owner);
}

export interface Certifier {
  /** Configured replicas (`redis.replicas`); 0: every certificate is granted at once (no replicas, the documented risk). */
  readonly replicas: number;
  /** Call right before issuing the write or read that `certify` will cover. */
  ticket(place?: Place): Ticket;
  /** Once the write/read replied: whether a WAIT sent after this call certifies it (never rejects). */
  certify(ticket: Ticket): Promise<Durability>;
  /** `certify(ticket(place))`: covers what the place's server had before the call, on the connection used now. */
  waitNow(place?: Place): Promise<Durability>;
  /** Takes a ticket, runs `write` (commands on this certifier's client), certifies it. */
  run<T>(place: Place, write: () => Promise<T>): Promise<{ value: T; durability: Durability }>;
}

interface Waiter {
  readonly generation: number;
  readonly resolve: (d: Durability) => void;
}

interface Batch {
  readonly probe: string;
  readonly waiters: Waiter[];
}

const NOT_DURABLE: Durability = { durable: false, acked: 0 };

/** The judgement of one `SET probe` / `WAIT` / `ROLE` pipeline. */
function judge(
  replies: [Error | null, unknown][] | null,
  replicas: number,
): { ok: boolean; acked: number; listed: number | undefined } {
  const [set, waited, role] = replies ?? [];
  if (!set || set[0] || !waited || waited[0]) return { ok: false, acked: 0, listed: undefined };
  const acked = Number(waited[1]);
  if (!role || role[0] || !Array.isArray(role[1]) || role[1][0] !== "master") {
    return { ok: false, acked, listed: undefined };
  }
  const list = role[1][2];
  const listed = Array.isArray(list) ? list.length : 0;
  return { ok: acked >= replicas && acked >= listed, acked, listed };
}

/**
 * A certifier over `redis` (standalone or Cluster). `timeoutMs` is WAIT's
 * timeout: while it runs, the connection it blocks answers nothing else.
 */
export function createCertifier(
  redis: RedisClient,
  options: { readonly replicas: number; readonly timeoutMs: number },
): Certifier {
  const { replicas, timeoutMs } = options;
  if (!Number.isInteger(replicas) || replicas < 0) throw new Error(`replicas ${replicas}: an integer ≥ 0`);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new Error(`WAIT timeout ${timeoutMs} ms: an integer ≥ 1 (0 would block forever)`);
  }
  /** The batch of each connection that is still open (not sent). */
  const open = new Map<Redis, Batch>();
  /** Connected replicas the last ROLE of a connection listed. */
  const listedBy = new WeakMap<Redis, number>();

  const flush = async (node: Redis, batch: Batch) => {
    // Closed before sending: whoever calls from now on gets the next batch.
    if (open.get(node) === batch) open.delete(node);
    const need = Math.max(replicas, listedBy.get(node) ?? 0);
    let verdict: { ok: boolean; acked: number; listed: number | undefined };
    try {
      const replies = await node.pipeline().set(batch.probe, "1").wait(need, timeoutMs).role().exec();
      verdict = judge(replies as [Error | null, unknown][] | null, replicas);
    } catch {
      verdict = { ok: false, acked: 0, listed: undefined };
    }
    if (verdict.listed !== undefined) listedBy.set(node, verdict.listed);
    const now = socketGeneration(node);
    for (const w of batch.waiters) {
      w.resolve({ durable: verdict.ok && w.generation === now, acked: verdict.acked });
    }
  };

  const ticket = (place: Place = 0): Ticket => {
    const slot = typeof place === "number" ? shardSlot(place) : keySlot(place.key);
    const probe = typeof place === "number" ? probeKey(place) : probeKeyOf(place.key);
    const node = slotNode(redis, slot);
    return { node, generation: node === undefined ? -1 : socketGeneration(node), probe };
  };

  const certify = (t: Ticket): Promise<Durability> => {
    if (replicas === 0) return Promise.resolve({ durable: true, acked: 0 });
    const node = t.node;
    // Reconnected already (or no connection): no WAIT can certify it.
    if (node === undefined || socketGeneration(node) !== t.generation) return Promise.resolve(NOT_DURABLE);
    return new Promise<Durability>((resolve) => {
      let batch = open.get(node);
      if (batch === undefined) {
        const fresh: Batch = { probe: t.probe, waiters: [] };
        open.set(node, fresh);
        setImmediate(() => void flush(node, fresh));
        batch = fresh;
      }
      batch.waiters.push({ generation: t.generation, resolve });
    });
  };

  return {
    replicas,
    ticket,
    certify,
    waitNow: (place) => certify(ticket(place)),
    async run(place, write) {
      const t = ticket(place);
      const value = await write();
      return { value, durability: await certify(t) };
    },
  };
}
