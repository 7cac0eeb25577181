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
