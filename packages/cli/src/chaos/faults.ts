// The faults, each an inject/heal pair against the real cluster. A scenario
// (scenarios.ts) places faults on its timeline; the randomized scenario draws
// them from the same catalog. Toxic names carry the fault's id, so faults on
// different proxies never remove each other's toxics.
import { readFileSync } from "node:fs";
import type { Cluster } from "../cluster/orchestrator.js";
import { redisLaunchOf, setClockOffset } from "./clock.js";
import { CHAOS_RESOURCE } from "./cluster.js";
import { type FailedOver, failOver } from "./failover.js";
import { flushRegion } from "../demo/faults.js";
import type { Rng } from "@geoquota/sim";
import { gossipProxiesOf, linkOf, redisProxyName } from "../cluster/ids.js";
import { setProxiesEnabled as setEnabled } from "../cluster/proxies.js";
import { addToxic, removeToxic, type ToxicSpec } from "./toxics.js";

export type FaultClass = "gossip" | "redis" | "daemon";

export const FAULT_KINDS = [
  "isolate",
  "split",
  "asymmetric",
  "flapping",
  "slow-link",
  "reset-peer",
  "redis-loss",
  "flush",
  "redis-restart",
  "daemon-kill",
] as const;
/**
 * The soak's catalogue: every scenario fault plus a latency spike, a Redis
 * restart that keeps its state, a policy change (new static weights; C
 * and r unchanged, so the fixed-limit oracle stays exact across it) and a
 * step of a region's Redis clock by more than 2ε (needs libfaketime: clock.ts).
 */
export const SOAK_FAULT_KINDS = [
  ...FAULT_KINDS,
  "latency-spike",
  "redis-restart-state",
  "policy-change",
  "clock-step",
  "failover",
] as const;
/**
 * Deliberately unsafe, for the soak's control only: C and r raised tenfold
 * behind the oracle's back (it still checks the original limit), so a soak
 * whose oracle works must report a violation.
 */
export const UNSAFE_FAULT_KINDS = ["policy-raise-unseen"] as const;
export type FaultKind = (typeof SOAK_FAULT_KINDS)[number] | (typeof UNSAFE_FAULT_KINDS)[number];
/** Faults that act once (nothing to heal). */
export const INSTANT_FAULTS: ReadonlySet<FaultKind> = new Set([
  "flush",
  "redis-restart-state",
  "policy-change",
  "policy-raise-unseen",
]);

export const FAULT_CLASS: Readonly<Record<FaultKind, FaultClass>> = {
  isolate: "gossip",
  split: "gossip",
  asymmetric: "gossip",
  flapping: "gossip",
  "slow-link": "gossip",
  "reset-peer": "gossip",
  "redis-loss": "redis",
  flush: "redis",
  "redis-restart": "redis",
  "daemon-kill": "daemon",
  "latency-spike": "gossip",
  // Through a region's limiter to its Redis: never while a Redis fault is on.
  "redis-restart-state": "redis",
  "policy-change": "redis",
  "policy-raise-unseen": "redis",
  // The Redis server's own clock: never during a restart of that Redis.
  "clock-step": "redis",
  failover: "redis",
};

/**
 * Faults of one lane never overlap, at plan time and when they run. A class is
 * its own lane, except that gossip-link faults and daemon kills share one: Toxiproxy
 * 2.12.0 deadlocks when a toxic is removed (or added) on a link whose peer has just
 * died with data still queued in its toxics (the removal holds the proxy's toxic lock
 * and waits for the link's last stub, which blocks writing to a writer that is itself
 * waiting for that lock to remove the dead link; Shopify/toxiproxy#558 and #412).
 * A daemon SIGKILLed while a slow-link fault held its links, then that fault's heal,
 * stopped the whole proxy twice in the 30-minute soak of 4 December (docs/soak-30m.md).
 * So a daemon is killed only while its links carry no fault of their own, and a
 * link fault starts only after a killed daemon is back and its dead links are gone.
 */
export type FaultLane = "links" | "redis";
export const FAULT_LANE: Readonly<Record<FaultClass, FaultLane>> = {
  gossip: "links",
  daemon: "links",
  redis: "redis",
};
export const laneOf = (kind: FaultKind): FaultLane => FAULT_LANE[FAULT_CLASS[kind]];

export interface Fault {
  readonly kind: FaultKind;
  readonly label: string;
  /** The region whose Redis forgot its state (its pre-fault counters are not expected back). */
  readonly lostRegion?: string;
  /** The region whose limiter lost its Redis (the fail-closed check applies to it). */
  readonly redisCutRegion?: string;
  /** A step of that region's Redis clock, ms (and back at the heal): Σ shares ≤ U is not claimed after either. */
  readonly clockStepMs?: number;
  /** What a multi-step fault did when (client ms of the scenario), for the report: a failover's address moves and promotions. */
  readonly steps?: { readonly what: string; readonly atMs: number }[];
  inject(): Promise<void>;
  heal(): Promise<void>;
}

export interface FaultTarget {
  readonly cluster: Cluster;
  readonly rng: Rng;
  /** Unique per fault instance (toxic names). */
  readonly id: string;
  /** The region the fault centres on. */
  readonly region: string;
  /** A second region, for faults on one link. */
  readonly peer: string;
  /** The scenario's clock (client ms from its start), for a fault's steps. */
  readonly now?: () => number;
}

function api(cluster: Cluster) {
  const t = cluster.toxiproxy;
  if (!t) throw new Error("chaos needs the cluster started with toxiproxy: true");
  return t.server.api;
}

async function addAll(cluster: Cluster, items: ReadonlyArray<[string, ToxicSpec]>): Promise<void> {
  await Promise.all(items.map(([proxy, spec]) => addToxic(api(cluster), proxy, spec)));
}

async function removeAll(cluster: Cluster, items: ReadonlyArray<[string, ToxicSpec]>): Promise<void> {
  await Promise.all(items.map(([proxy, spec]) => removeToxic(api(cluster), proxy, spec.name)));
}

function bothWays(
  proxies: readonly string[],
  make: (stream: "upstream" | "downstream") => ToxicSpec,
): Array<[string, ToxicSpec]> {
  return proxies.flatMap(
    (p): Array<[string, ToxicSpec]> => [
      [p, make("upstream")],
      [p, make("downstream")],
    ],
  );
}

/** Builds one fault of `kind` (its parameters drawn from `t.rng`). */
export function makeFault(kind: FaultKind, t: FaultTarget): Fault {
  const { cluster, rng, id, region, peer } = t;
  const ids = cluster.regions.map((r) => r.id);
  const regionLinks = gossipProxiesOf(ids, region);
  switch (kind) {
    case "isolate":
      // Every gossip link of the region refused: connections drop at once.
      return {
        kind,
        label: `${region} cut off (gossip links down)`,
        inject: () => setEnabled(api(cluster), regionLinks, false),
        heal: () => setEnabled(api(cluster), regionLinks, true),
      };
    case "split": {
      // 2|1 as a silent black hole: data stalls in Toxiproxy (timeout 0 never
      // closes) and is delivered late, all at once, when the toxic goes.
      const toxics = bothWays(regionLinks, (stream) => ({
        name: `${id}_blackhole_${stream}`,
        type: "timeout",
        stream,
        attributes: { timeout: 0 },
      }));
      const rest = ids.filter((x) => x !== region).join("+");
      return {
        kind,
        label: `split ${rest} | ${region} (black hole)`,
        inject: () => addAll(cluster, toxics),
        heal: () => removeAll(cluster, toxics),
      };
    }
    case "asymmetric": {
      const { proxy, streamFromX } = linkOf(region, peer);
      const toxics: Array<[string, ToxicSpec]> = [
        [proxy, { name: `${id}_oneway`, type: "timeout", stream: streamFromX, attributes: { timeout: 0 } }],
      ];
      return {
        kind,
        label: `${region}→${peer} stalled, ${peer}→${region} flows`,
        inject: () => addAll(cluster, toxics),
        heal: () => removeAll(cluster, toxics),
      };
    }
    case "flapping": {
      const { proxy } = linkOf(region, peer);
      let stop = false;
      let loop: Promise<void> | undefined;
      const periodMin = rng.int(150, 300);
      const periodMax = periodMin + rng.int(200, 600);
      const seq = Array.from({ length: 256 }, () => rng.int(periodMin, periodMax));
      return {
        kind,
        label: `${region}↔${peer} flapping every ${periodMin}–${periodMax} ms`,
        inject: async () => {
          loop = (async () => {
            let up = true;
            for (let i = 0; !stop && i < seq.length; i++) {
              up = !up;
              await setEnabled(api(cluster), [proxy], up);
              await new Promise((r) => setTimeout(r, seq[i]));
            }
          })();
        },
        heal: async () => {
          stop = true;
          await loop;
          await setEnabled(api(cluster), [proxy], true);
        },
      };
    }
    case "slow-link": {
      // Narrow (KB/s) and chopped into small delayed segments, both directions.
      const rate = rng.int(1, 4);
      const toxics = [
        ...bothWays(regionLinks, (stream) => ({
          name: `${id}_bw_${stream}`,
          type: "bandwidth",
          stream,
          attributes: { rate },
        })),
        ...bothWays(regionLinks, (stream) => ({
          name: `${id}_slicer_${stream}`,
          type: "slicer",
          stream,
          attributes: { average_size: 48, size_variation: 32, delay: rng.int(1000, 5000) },
        })),
      ];
      return {
        kind,
        label: `${region}'s links at ${rate} KB/s, sliced`,
        inject: () => addAll(cluster, toxics),
        heal: () => removeAll(cluster, toxics),
      };
    }
    case "reset-peer": {
      const timeout = rng.int(100, 600);
      const toxics = bothWays(regionLinks, (stream) => ({
        name: `${id}_reset_${stream}`,
        type: "reset_peer",
        stream,
        attributes: { timeout },
      }));
      return {
        kind,
        label: `${region}'s links reset by peer after ${timeout} ms`,
        inject: () => addAll(cluster, toxics),
        heal: () => removeAll(cluster, toxics),
      };
    }
    case "redis-loss":
      return {
        kind,
        label: `${region}'s limiter and daemon lose their Redis`,
        redisCutRegion: region,
        inject: () => setEnabled(api(cluster), [redisProxyName(region)], false),
        heal: () => setEnabled(api(cluster), [redisProxyName(region)], true),
      };
    case "flush":
      return {
        kind,
        label: `FLUSHALL on ${region}'s Redis`,
        lostRegion: region,
        inject: () => flushRegion(cluster, region),
        heal: async () => {},
      };
    case "redis-restart": {
      const r = regionOf(cluster, region);
      return {
        kind,
        label: `${region}'s Redis SIGKILLed, restarted empty`,
        lostRegion: region,
        inject: () => r.redisServer.kill(),
        heal: () => r.redisServer.restart(),
      };
    }
    case "latency-spike": {
      const latency = rng.int(150, 600);
      const toxics = bothWays(regionLinks, (stream) => ({
        name: `${id}_spike_${stream}`,
        type: "latency",
        stream,
        attributes: { latency, jitter: Math.round(latency / 4) },
      }));
      return {
        kind,
        label: `${region}'s links +${latency} ms latency`,
        inject: () => addAll(cluster, toxics),
        heal: () => removeAll(cluster, toxics),
      };
    }
    case "redis-restart-state": {
      const r = regionOf(cluster, region);
      return {
        kind,
        label: `${region}'s Redis restarted with its state (SHUTDOWN SAVE, reloaded)`,
        inject: () => r.redisServer.restart({ keepState: true }),
        heal: async () => {},
      };
    }
    case "policy-change": {
      const weights = Object.fromEntries(ids.map((x) => [x, rng.int(1, 4)]));
      return {
        kind,
        label: `policy change via ${region}: weights ${ids.map((x) => `${x}=${weights[x]}`).join(" ")}`,
        inject: () => proposeChaosPolicy(cluster, region, { weights }),
        heal: async () => {},
      };
    }
    case "policy-raise-unseen":
      return {
        kind,
        label: `UNSAFE: C and r raised tenfold via ${region}, the oracle not told`,
        inject: () => proposeChaosPolicy(cluster, region, { scale: 10 }),
        heal: async () => {},
      };
    case "clock-step": {
      // More than 2ε (ε = 250 ms), forward or back; healed by stepping back to +0.
      const stepMs = (rng.float() < 0.5 ? -1 : 1) * rng.int(600, 1500);
      return {
        kind,
        label: `${region}'s Redis clock stepped ${stepMs > 0 ? "+" : ""}${stepMs} ms (libfaketime), stepped back later`,
        clockStepMs: stepMs,
        inject: async () => setClockOffset(cluster, region, stepMs),
        heal: async () => setClockOffset(cluster, region, 0),
      };
    }
    case "failover": {
      const r = regionOf(cluster, region);
      let done: FailedOver | undefined;
      const steps: { what: string; atMs: number }[] = [];
      const step = (what: string) => steps.push({ what, atMs: t.now?.() ?? Number.NaN });
      return {
        kind,
        label: `${region}'s Redis failed over to a replica behind its one address, failed back later`,
        steps,
        inject: async () => {
          done = await failOver(api(cluster), region, r.redisServer, redisLaunchOf(cluster, region), step);
        },
        heal: async () => {
          await done?.failBack();
        },
      };
    }
    case "daemon-kill": {
      // Down between inject and heal, then a new daemon on the same config.
      regionOf(cluster, region); // fails early on an unknown region
      return {
        kind,
        label: `${region}'s gossip daemon SIGKILLed, restarted later`,
        inject: () => cluster.stopGossip(region, { kill: true }),
        heal: () => cluster.startGossip(region),
      };
    }
  }
}

const ADMIN_TOKEN = "local-cluster-admin";

/**
 * Proposes the cluster's policies document through `region`'s admin API with
 * the chaos resource's entry changed: new weights, or C and r scaled.
 */
async function proposeChaosPolicy(
  cluster: Cluster,
  region: string,
  change: { weights?: Record<string, number>; scale?: number },
): Promise<void> {
  const doc = JSON.parse(readFileSync(cluster.policiesPath, "utf8")) as {
    policies: Array<Record<string, unknown>>;
  };
  const entry = doc.policies.find((p) => p.resource === CHAOS_RESOURCE);
  if (!entry) throw new Error(`no ${CHAOS_RESOURCE} policy in ${cluster.policiesPath}`);
  if (change.weights) entry.weights = change.weights;
  if (change.scale !== undefined) {
    entry.capacity = Number(entry.capacity) * change.scale;
    entry.refillPerSecond = Number(entry.refillPerSecond) * change.scale;
  }
  const res = await fetch(`${regionOf(cluster, region).url}/v1/policy`, {
    method: "PUT",
    // Built from the policies file, not from a version read back: "replace whatever is newest"
    // (If-Match: *), as a SIGHUP reload proposes it. A bare PUT is refused 428.
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      "content-type": "application/json",
      "if-match": "*",
    },
    body: JSON.stringify(doc),
    // The proposal is replicated before the answer; a stalled link or a
    // loaded machine makes that slow (5 s timed out in a soak).
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) throw new Error(`PUT /v1/policy via ${region}: ${res.status} ${await res.text()}`);
  await res.body?.cancel().catch(() => {});
}

function regionOf(cluster: Cluster, id: string) {
  const r = cluster.regions.find((x) => x.id === id);
  if (!r) throw new Error(`no region ${id}`);
  return r;
}
