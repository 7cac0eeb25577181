// Checker: Σ_i s_i(t) ≤ U at the real instant t, each s_i read at its own
// region's clock (t + offset_i), after every event. The instants where a share
// changes without a script (deadline ± ε, recovery end, lease expiry) are
// events too (World.scheduleBreakpoints).
import { SHARE_UNITS as U } from "@geoquota/core";
import type { World } from "./world.js";

export interface SharesChecker {
  /** Checks now; returns each region's share as read (the lease checker uses them at the same instant). */
  check(): readonly number[];
  /** The largest Σ s − U seen (≤ 0 when the check held). */
  readonly worstShareExcess: number;
}

export function createSharesChecker(w: World): SharesChecker {
  const { nodes } = w;
  const sharesNow: number[] = nodes.map(() => 0);
  let worstShareExcess = Number.NEGATIVE_INFINITY;
  return {
    check() {
      let sum = 0;
      for (const node of nodes) {
        const s = node.redis.shareAt(node.view.limit, w.localNow(node));
        sharesNow[node.index] = s;
        sum += s;
      }
      if (sum - U > worstShareExcess) worstShareExcess = sum - U;
      if (sum > U) {
        const parts = nodes.map((x) => `${x.id}=${x.redis.shareAt(x.view.limit, w.localNow(x))}`).join(" ");
        w.fail(`Σ shares ${sum} > U (${parts})`);
      }
      return sharesNow;
    },
    get worstShareExcess() {
      return worstShareExcess;
    },
  };
}
