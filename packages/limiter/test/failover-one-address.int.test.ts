// DESIGN §4 "Durability certificates", on real Redis, with failover done as
// production does it: one address in front of the region (a Toxiproxy proxy
// standing for a VIP, a DNS name, a cloud endpoint) whose upstream is
// switched to the promoted replica, and the caller's own client reconnecting
// through it. The old primary P is first isolated from its replicas (R1 is
// promoted with `REPLICAOF NO ONE`, R2 follows R1: the new primary already
// has a replica that acknowledges: R2, attached to it then), then stopped while a durability WAIT
// runs on it, and the proxy is pointed at R1. A WAIT answered after the
// reconnect comes from R1 (acked by R2) and must not certify a write P took:
// R1 never had it. Covered: checks, compound checks, lease grants (a caller's
// ioredis client with the default offline queue and resend), loan grants,
// early returns and the daemon's read-back certification (the daemon's own
// connection, offline queue on). durable-admissions.int.test.ts keeps the
// failover that builds a new store on the replica's port.
import {
  connectRedis,
  createCertifier,
  createGossipStore,
  createRedisStore,
  initFreshRegion,
  NotDurableError,
  type RedisRegionStore,
} from "@geoquota/redis";
import {
  type Admission,
  checkGlobalBound,
  type RedisServer,
  startRedis,
  startReplica,
  startToxiproxy,
  type ToxiproxyServer,
  waitFor,
} from "@geoquota/testkit";
import { type CertifiedWrite, SNAPSHOT_KEY, writeSnapshot } from "@geoquota/rollout";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { KeyPolicy } from "@geoquota/core";
import { policy, sleep, TIMING } from "@geoquota/testkit";

const started: RedisServer[] = [];
const clients: Redis[] = [];
let toxiproxy: ToxiproxyServer;
let proxies = 0;

beforeAll(async () => {
  toxiproxy = await startToxiproxy();
});
afterAll(async () => {
  await toxiproxy?.stop();
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

/** A WAIT on the isolated P runs this long: the failover lands well inside it. */
const WAIT_MS = 3000;
/** When the old primary is stopped after the operations started (their writes replied by then). */
const FAILOVER_AFTER_MS = 300;

interface Region {
  readonly p: RedisServer;
  readonly r1: RedisServer;
  readonly r2: RedisServer;
  /** The one address clients use: `redis://<proxy>` (upstream P, then R1). */
  readonly url: string;
  /** P isolated: R1 promoted, R2 replicating from R1 (and acknowledging it). */
  isolatePrimary(): Promise<void>;
  /** The proxy's upstream switched to R1 (existing connections are cut), then P stopped. */
  failOver(): Promise<void>;
}

/** Replication settled: a write on `server` acknowledged by `n` replicas (WAIT covers the server's offset). */
async function acknowledged(server: RedisServer, n: number): Promise<void> {
  const admin = server.client();
  await waitFor(`${n} replicas acknowledging ${server.port}`, async () => {
    await admin.set("test:ack", "1");
    return (await admin.wait(n, 200)) >= n;
  });
}

async function regionBehindProxy(): Promise<Region> {
  const p = await startRedis();
  started.push(p);
  const r1 = await startReplica(p);
  started.push(r1);
  // R2 joins the promoted replica at the isolation (P has exactly redis.replicas = 1).
  // Loads its sync from the socket: a disk load would leave a dump.rdb in the cwd for later servers.
  const r2 = await startRedis({ args: ["--repl-diskless-load", "on-empty-db"] });
  started.push(r2);
  proxies += 1;
  const { proxy, listen } = await toxiproxy.proxy(`region${proxies}`, `${p.host}:${p.port}`);
  await initFreshRegion(p.client());
  return {
    p,
    r1,
    r2,
    url: `redis://${listen}`,
    async isolatePrimary() {
      await acknowledged(p, 1);
      await r1.client().replicaof("NO", "ONE");
      await r2.client().replicaof(r1.host, String(r1.port));
      await acknowledged(r1, 1);
    },
    async failOver() {
      // The address moves first (its existing connections are cut, new ones reach R1), then P dies.
      await proxy.update({ enabled: true, listen, upstream: `${r1.host}:${r1.port}` });
      await p.kill();
    },
  };
}

/** The caller's own client with ioredis's defaults: offline queue, resend of unanswered commands, 20 retries. */
function callersClient(url: string): Redis {
  const c = new Redis(url);
  c.on("error", () => {});
  clients.push(c);
  return c;
}

/** Calls `op` until it answers (the client reconnects to the promoted replica meanwhile). */
async function once<T>(op: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

/** The values, or the errors, of `ops` (handled at once: a rejection before the failover is no unhandled one). */
function settle<T>(ops: Promise<T>[]): Promise<(T | Error)[]> {
  return Promise.all(
    ops.map((o) => o.catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))))),
  );
}

type Admit = (store: RedisRegionStore, p: KeyPolicy, q: KeyPolicy) => Promise<number>;

/** Each admits 2 of p's tokens (what it returns), or throws. */
const PATHS: Record<string, Admit> = {
  check: async (s, p) => ((await s.check(p, 2)).allowed ? 2 : 0),
  "compound check": async (s, p, q) =>
    (
      await s.checkCompound([
        { policy: p, cost: 2 },
        { policy: q, cost: 1 },
      ])
    ).allowed
      ? 2
      : 0,
  "lease grant": async (s, p) => (await s.acquireLease(p, 2, 2000)).granted,
};

describe("failover behind one address (DESIGN §4 durability certificates)", () => {
  for (const [name, admit] of Object.entries(PATHS)) {
    it(`${name}: nothing the promoted replica lacks was answered as admitted (caller's client, default offline queue)`, async () => {
      const region = await regionBehindProxy();
      const redis = callersClient(region.url);
      const store = createRedisStore({
        redis,
        region: "us",
        timing: TIMING,
        durability: { replicas: 1, timeoutMs: WAIT_MS },
      });
      // C = 10, r = 0.1/s: the exact single-region bound over [first, last] is C + r·T.
      const p = policy({ capacity: 10, refillPerSecond: 0.1 });
      const q = policy({ capacity: 10, refillPerSecond: 0.1 });
      const warm = await store.check(p, 1);
      expect(warm.allowed).toBe(true);
      await store.check(q, 1);
      let admitted = 1;
      await region.isolatePrimary();
      // Two concurrent admissions on P: their WAITs cannot complete there (no replica left).
      const ops = Promise.allSettled([admit(store, p, q), admit(store, p, q)]);
      await sleep(FAILOVER_AFTER_MS);
      await region.failOver();
      const outcomes = await ops;
      for (const o of outcomes) {
        if (o.status === "fulfilled") admitted += o.value;
        else expect(o.reason).toBeInstanceOf(NotDurableError);
      }
      // The promoted replica (R1, acked by R2) now answers through the same address.
      let lastUs = warm.nowUs;
      for (let i = 0; i < 30; i++) {
        const d = await once(() => store.check(p, 1));
        lastUs = d.nowUs;
        if (!d.allowed) break;
        admitted += 1;
      }
      const bound = 10 + (0.1 * (lastUs - warm.nowUs)) / 1e6;
      const seen = outcomes.map((o) => (o.status === "fulfilled" ? o.value : String(o.reason)));
      expect(admitted, `on P: ${JSON.stringify(seen)}`).toBeLessThanOrEqual(bound);
      // Not vacuous: the promoted replica admitted its whole bucket (C − warm-up).
      expect(admitted).toBeGreaterThanOrEqual(10);
      await store.close();
    });
  }

  /** A lender region behind the proxy and the daemon's connection to it (role daemon: offline queue, one retry). */
  async function daemonOn(region: Region) {
    const redis = connectRedis(region.url, { role: "daemon" });
    clients.push(redis as Redis);
    return createGossipStore({ redis, region: "us", timing: TIMING, replicas: 1, waitTimeoutMs: WAIT_MS });
  }

  /** What the promoted replica holds for a key (read on its own port, not through the proxy). */
  function onPromoted(region: Region) {
    const direct = region.r1.client();
    return createGossipStore({ redis: direct, region: "us", timing: TIMING, replicas: 0 });
  }

  const lendable = () => policy({ capacity: 100, refillPerSecond: 10 }, { base: 500_000 });

  it("loan grants: a grant answered durable is on the promoted replica", async () => {
    const region = await regionBehindProxy();
    const gossip = await daemonOn(region);
    const a = lendable();
    const b = lendable();
    // Both keys exist on every server before the isolation.
    await gossip.readKeyState(a);
    await gossip.readKeyState(b);
    await region.isolatePrimary();
    const grants = settle([gossip.grantLoan(a, "eu", 100_000), gossip.grantLoan(b, "eu", 100_000)]);
    await sleep(FAILOVER_AFTER_MS);
    await region.failOver();
    const results = await grants;
    const promoted = onPromoted(region);
    for (const [i, key] of [a, b].entries()) {
      const g = results[i];
      if (g instanceof Error || !(g as { ok: boolean }).ok) continue;
      const grant = g as { durable: boolean; loan: { seq: number } };
      const held = (await promoted.readKeyState(key)).granted.some((l) => l.seq >= grant.loan.seq);
      // Durable ⇒ the promoted replica has it (here it cannot: P took it after the isolation).
      if (grant.durable) expect(held, `grant ${i} certified but missing on the promoted replica`).toBe(true);
    }
    // Not vacuous: a grant the promoted replica takes is certified there.
    const after = await once(() => gossip.grantLoan(a, "eu", 100_000));
    expect(after).toMatchObject({ ok: true, durable: true });
  });

  it("early returns: a return answered durable is on the promoted replica", async () => {
    const region = await regionBehindProxy();
    const gossip = await daemonOn(region);
    const a = lendable();
    const b = lendable();
    const { nowUs } = await gossip.currentIncarnation(a.tenant);
    for (const key of [a, b]) {
      const loan = { lender: "eu", borrower: "us", units: 50_000, deadlineUs: nowUs + 2_900_000, seq: 7 };
      await gossip.mergeRemote(key, [loan], {});
    }
    await region.isolatePrimary();
    const returns = settle([gossip.returnLoan(a, "eu"), gossip.returnLoan(b, "eu")]);
    await sleep(FAILOVER_AFTER_MS);
    await region.failOver();
    const results = await returns;
    const promoted = onPromoted(region);
    for (const [i, key] of [a, b].entries()) {
      const r = results[i];
      if (r instanceof Error) continue;
      const ret = r as { seq: number; durable: boolean };
      expect(ret.seq).toBe(7);
      const held = ((await promoted.readKeyState(key)).returned.eu ?? 0) >= 7;
      // Durable ⇒ the promoted replica knows the borrower stopped using the loan.
      if (ret.durable) expect(held, `return ${i} certified but missing on the promoted replica`).toBe(true);
    }
    // Not vacuous: the promoted replica still holds the loan, and its return there is certified.
    expect(await once(() => gossip.returnLoan(a, "eu"))).toMatchObject({ seq: 7, durable: true });
  });

  it("read-back: records read before a reconnect are not certified by a WAIT after it", async () => {
    const region = await regionBehindProxy();
    const gossip = await daemonOn(region);
    const a = lendable();
    await gossip.readKeyState(a);
    await region.isolatePrimary();
    // A grant P took after the isolation (its own WAIT failed: held, to be read back later).
    const other = createGossipStore({ redis: region.p.client(), region: "us", timing: TIMING, replicas: 1 });
    const g = await other.grantLoan(a, "eu", 100_000);
    expect(g).toMatchObject({ ok: true, durable: false });
    const read = await gossip.readKeyState(a);
    expect(read.granted).toHaveLength(1);
    await region.failOver();
    // The daemon certifies what it read: the read went out before the reconnect.
    expect(await once(() => gossip.waitDurable(a, read.ticket))).toBe(false);
    expect((await onPromoted(region).readKeyState(a)).granted).toHaveLength(0);
    // A read after the reconnect is certified (and holds no grant).
    const again = await once(() => gossip.readKeyState(a));
    expect(again.granted).toHaveLength(0);
    expect(await gossip.waitDurable(a, again.ticket)).toBe(true);
  });

  it("policy snapshots: a snapshot answered durable is on the promoted replica", async () => {
    const region = await regionBehindProxy();
    const redis = connectRedis(region.url, { role: "daemon" });
    clients.push(redis as Redis);
    // As the daemon's main.ts wires it: the same certifier as loans.
    const certifier = createCertifier(redis, { replicas: 1, timeoutMs: WAIT_MS });
    const certified: CertifiedWrite = async (place, write) =>
      (await certifier.run(place, write)).durability.durable;
    await redis.get(SNAPSHOT_KEY);
    await region.isolatePrimary();
    const [written] = await settle([
      (async () => {
        const w = writeSnapshot(redis, '{"snapshot":1}', { replicas: 1, certified });
        await sleep(FAILOVER_AFTER_MS);
        await region.failOver();
        return w;
      })(),
    ]);
    const onPromoted = await region.r1.client().get(SNAPSHOT_KEY);
    if (written === true)
      expect(onPromoted, "snapshot certified but missing on the promoted replica").toBe('{"snapshot":1}');
    // Not vacuous: a snapshot the promoted replica takes is certified there.
    expect(await once(() => writeSnapshot(redis, '{"snapshot":2}', { replicas: 1, certified }))).toBe(true);
    expect(await region.r1.client().get(SNAPSHOT_KEY)).toBe('{"snapshot":2}');
  });

  it("across regions (exact oracle): the lender fails over behind its proxy right after a grant; the borrower uses only certified loans", async () => {
    // us lends to eu; C = 100, r = 100/s globally, base shares 1/2 each.
    const us = await regionBehindProxy();
    const euServer = await startRedis();
    started.push(euServer);
    const euRedis = euServer.client();
    await initFreshRegion(euRedis);
    const usRedis = callersClient(us.url);
    const usLimiter = createRedisStore({
      redis: usRedis,
      region: "us",
      timing: TIMING,
      durability: { replicas: 1, timeoutMs: WAIT_MS },
    });
    const euLimiter = createRedisStore({ redis: euRedis, region: "eu", timing: TIMING });
    const usDaemon = await daemonOn(us);
    const euDaemon = createGossipStore({ redis: euRedis, region: "eu", timing: TIMING });
    const key = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000 });
    const other = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000 });
    await usDaemon.readKeyState(key);
    await usDaemon.readKeyState(other);
    await euDaemon.readKeyState(key);
    await us.isolatePrimary();
    // A round's two grants (another key's first): the lender's P takes them, then the address moves.
    const grants = settle([usDaemon.grantLoan(other, "eu", 300_000), usDaemon.grantLoan(key, "eu", 300_000)]);
    await sleep(FAILOVER_AFTER_MS);
    await us.failOver();
    const [, granted] = await grants;
    // Shipped only when durable (redis-port.ts grantLoan), merged by the borrower.
    const shipped = !(granted instanceof Error) && granted?.ok === true && granted.durable;
    if (shipped) await euDaemon.mergeRemote(key, [granted.loan], {});
    await once(() => usLimiter.check(other, 1));
    // Both regions admit as fast as they can, inside the lender's detection window.
    const admissions: Admission[] = [];
    const drive = async (store: RedisRegionStore) => {
      const end = performance.now() + 1500;
      while (performance.now() < end) {
        const sentMs = performance.now();
        try {
          const d = await store.check(key, 1);
          if (d.allowed) admissions.push({ sentMs, answeredMs: performance.now(), cost: 1 });
        } catch (err) {
          if (!(err instanceof NotDurableError)) throw err;
        }
      }
    };
    await Promise.all([drive(usLimiter), drive(euLimiter)]);
    const verdict = checkGlobalBound(admissions, { capacity: 100, refillPerSecond: 100 });
    expect(
      verdict.ok,
      `shipped ${shipped}: ${JSON.stringify({ ...verdict, worstInterval: verdict.worstInterval })}`,
    ).toBe(true);
    // Not vacuous: both regions admitted (the bound is approached, not avoided).
    expect(verdict.admitted).toBeGreaterThan(150);
    await usLimiter.close();
    await euLimiter.close();
  });
});
