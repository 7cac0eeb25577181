// Checker: the leases (DESIGN §3, the global form of "leased + bucket ≤
// capacity of the pinned share"): Σ_i max(C·s_i, U·(leased_i +
// max(0, bucket_i))) ≤ C·U, after every event of a run with leased clients.
import { capacityOf, SHARE_UNITS as U } from "@geoquota/core";
import type { Node, World } from "./world.js";

/**
 * Leased tokens a region's clients can still spend or Redis still counts:
 * Redis's unexpired leases, plus what clients hold of leases Redis no longer
 * records (a wipe or a failover forgot them; the clients spend them anyway).
 */
function leasedOf(
  w: World,
  node: Node,
  recorded: ReadonlyMap<string, { tokens: number; expiryUs: number }>,
): number {
  const local = w.localNow(node);
  let sum = 0;
  for (const l of recorded.values()) if (local < l.expiryUs) sum += l.tokens;
  const now = w.clock.nowUs();
  for (const c of node.clients) {
    const l = c.lease;
    if (l === undefined || now >= l.stopAtUs) continue;
    const r = recorded.get(l.id);
    if (r === undefined || local >= r.expiryUs) sum += l.tokens - l.used;
  }
  return sum;
}

/** `shares`: each region's share as the shares checker read it at this instant; `boundCapacity`: the run's widest C. */
export function checkLeases(w: World, shares: readonly number[], boundCapacity: number): void {
  const { nodes } = w;
  let capScaled = 0;
  let overScaled = 0;
  let bound = boundCapacity;
  for (const node of nodes) {
    const limit = node.view.limit;
    if (limit.capacity > bound) bound = limit.capacity;
    const s = shares[node.index] ?? 0;
    capScaled += limit.capacity * s;
    const leased = leasedOf(w, node, node.redis.key.leases);
    const tokens = node.redis.bucketTokensAt(limit, w.localNow(node)) ?? 0;
    // Exact in the model's own arithmetic: the bucket is clamped to capacityOf(C, s, leased).
    const ok =
      tokens >= 0
        ? tokens <= capacityOf(limit.capacity, s, leased)
        : 0 <= capacityOf(limit.capacity, s, leased);
    if (!ok) overScaled += U * (leased + Math.max(0, tokens)) - limit.capacity * s;
  }
  if (overScaled > 0 && capScaled + overScaled > bound * U) {
    const parts = nodes
      .map((x) => {
        const b = x.redis.tokensAt(x.view.limit, w.localNow(x));
        return `${x.id}: s=${x.redis.shareAt(x.view.limit, w.localNow(x))} leased=${leasedOf(w, x, x.redis.key.leases)} bucket=${b?.tokens ?? "-"}`;
      })
      .join("; ");
    w.fail(
      `leased + bucket exceeds the capacity of the shares: Σ = ${(capScaled + overScaled) / U} > C = ${bound} (${parts})`,
    );
  }
}
