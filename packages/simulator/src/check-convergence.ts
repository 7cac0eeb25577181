// Checker, at the end (after the heal and the quiet phase): every region's
// Redis holds the same counters, and every region knows the same newest
// policy version.
import { decodeSnapshot, idKey } from "@geoquota/rollout";
import type { Node, World } from "./world.js";

function sameCounters(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

export function checkConvergence(w: World): void {
  const { nodes } = w;
  const first = nodes[0];
  if (first === undefined) return;
  for (const node of nodes.slice(1)) {
    if (!sameCounters(first.redis.key.counters, node.redis.key.counters)) {
      const policy = nodes.map((x) => `${x.id}=${x.daemon?.status().policy?.phase ?? "down"}`).join(" ");
      w.fail(`counters of ${first.id} and ${node.id} did not converge after heal (policy: ${policy})`);
    }
  }
  // Every region knows the same newest policy version after the heal.
  const targetOf = (x: Node): string => {
    const d = x.redis.policy === null ? undefined : decodeSnapshot(x.redis.policy);
    return d?.ok === true ? idKey(d.value.target) : "no snapshot";
  };
  for (const node of nodes.slice(1)) {
    if (targetOf(node) !== targetOf(first)) {
      w.fail(
        `policy targets of ${first.id} (${targetOf(first)}) and ${node.id} (${targetOf(node)}) differ after heal`,
      );
    }
  }
}
