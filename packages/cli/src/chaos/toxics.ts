// Toxiproxy operations the scenarios use, on the cluster's real Toxiproxy
// server. Proxy `gossip_<a>_<b>` carries the one TCP link between a and b
// (a dials b): its `upstream` stream is a→b, `downstream` is b→a. Proxy
// `redis_<id>` is region id's limiter and daemon → its own Redis.
import type { Toxiproxy } from "toxiproxy-node-client";
import type { Rng } from "@geoquota/sim";
import { type BusyRetry, whileBusy } from "../cluster/proxies.js";

export type Stream = "upstream" | "downstream";
export type ToxicType = "latency" | "bandwidth" | "slicer" | "timeout" | "reset_peer";

/**
 * Lowest one-way delay the WAN latency toxic allows (latency − jitter). The
 * share-sum check pairs samples no further apart than this: see checks.ts.
 */
export const WAN_ONE_WAY_MIN_MS = 35;
export const WAN_ONE_WAY_MAX_MS = 50;

export interface ToxicSpec {
  readonly name: string;
  readonly type: ToxicType;
  readonly stream: Stream;
  readonly attributes: Readonly<Record<string, number>>;
}

export async function addToxic(api: Toxiproxy, proxy: string, t: ToxicSpec): Promise<void> {
  // 409 on a retry: the try answered 503 added it after all.
  await whileBusy(
    async () => {
      const p = await api.get(proxy);
      await p.addToxic({
        name: t.name,
        type: t.type,
        stream: t.stream,
        toxicity: 1,
        attributes: t.attributes as never,
      });
    },
    { landed: 409 },
  );
}

export async function removeToxic(
  api: Toxiproxy,
  proxy: string,
  name: string,
  retry: Omit<BusyRetry, "landed"> = {},
): Promise<void> {
  // 404 on a retry: the try answered 503 removed it after all.
  await whileBusy(
    async () => {
      const p = await api.get(proxy);
      const t = await p.getToxic(name);
      await t.remove();
    },
    { ...retry, landed: 404 },
  );
}

/**
 * WAN-like delay on every gossip link, both directions: latency L in
 * [40, 45] ms with jitter J so that L ± J stays in [35, 50] ms.
 */
export async function addWanLatency(api: Toxiproxy, proxies: readonly string[], rng: Rng): Promise<void> {
  const specs: Array<[string, ToxicSpec]> = [];
  for (const proxy of proxies) {
    for (const stream of ["upstream", "downstream"] as const) {
      const latency = rng.int(40, 45);
      const jitter = Math.min(latency - WAN_ONE_WAY_MIN_MS, WAN_ONE_WAY_MAX_MS - latency);
      specs.push([
        proxy,
        { name: `wan_${stream}`, type: "latency", stream, attributes: { latency, jitter } },
      ]);
    }
  }
  await Promise.all(specs.map(([proxy, spec]) => addToxic(api, proxy, spec)));
}
