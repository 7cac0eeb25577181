/** Region ids for a local cluster of `n` regions: the example deployments first. */
const NAMED = [
  "us-east",
  "eu-west",
  "ap-south",
  "sa-east",
  "af-south",
  "me-central",
  "ca-central",
  "au-east",
];

export function regionIds(n: number): string[] {
  return Array.from({ length: n }, (_, i) => NAMED[i] ?? `region-${i + 1}`);
}

/** The region with the smaller id dials the other (the gossip mesh's rule). */
export function dialPairs(ids: readonly string[]): Array<[dialer: string, acceptor: string]> {
  const pairs: Array<[string, string]> = [];
  for (const a of ids) for (const b of ids) if (a < b) pairs.push([a, b]);
  return pairs;
}

/** The Toxiproxy proxy of the gossip link between a and b (a < b: a dials b). */
export function gossipProxyName(a: string, b: string): string {
  return a < b ? `gossip_${a}_${b}` : `gossip_${b}_${a}`;
}

/** Every gossip link's proxy. */
export function gossipProxyNames(ids: readonly string[]): string[] {
  return dialPairs(ids).map(([a, b]) => gossipProxyName(a, b));
}

/** The proxies of every gossip link with `region` at either end. */
export function gossipProxiesOf(ids: readonly string[], region: string): string[] {
  return dialPairs(ids)
    .filter(([a, b]) => a === region || b === region)
    .map(([a, b]) => gossipProxyName(a, b));
}

/**
 * The proxy of the link between x and y, and the stream that carries x→y on
 * it: a proxy's `upstream` is dialer→acceptor, `downstream` the way back.
 */
export function linkOf(x: string, y: string): { proxy: string; streamFromX: "upstream" | "downstream" } {
  return { proxy: gossipProxyName(x, y), streamFromX: x < y ? "upstream" : "downstream" };
}

/** The proxy between region id's limiter and its Redis. */
export function redisProxyName(id: string): string {
  return `redis_${id}`;
}

/** The proxy between region id's gossip daemon and its Redis (ClusterOptions.daemonRedisProxy). */
export function daemonRedisProxyName(id: string): string {
  return `redisd_${id}`;
}
