// The primary watchers (DESIGN §4 "Checked continuously"; replication.ts
// createPrimaryWatcher) of the daemon and of the limiter process, over the
// model Redis: the settings each finds unsafe at its tick (it fails closed on
// them), the marker rotation when eviction is seen or gone, memory pressure
// while eviction is on, and what a failover does to both.
import { type Node, SETUP_SETTINGS, type SetupSetting, type World } from "./world.js";

export interface SetupWatch {
  /**
   * One watcher tick of one process (its own `drift`), at the region's Redis
   * time `localUs`: an evicting policy seen or gone rotates the marker
   * (recovery: what was evicted is forgotten state); `drift` is what the
   * process fails closed on. Memory pressure (evictions) starts at the first
   * tick after the switch, noticed or not (FaultOptions.evictions).
   */
  watchSetup(node: Node, drift: Set<SetupSetting>, localUs: number): void;
  /**
   * A failover: another server is the primary. The operator's evicting
   * setting is assumed on it too (the worst case), but its memory pressure
   * starts afresh at the first watcher tick, which also sees its replid.
   */
  promoted(node: Node): void;
}

export function createSetupWatch(w: World): SetupWatch {
  const { opts, clock, stats } = w;
  const unsafeSettings = (node: Node): Set<SetupSetting> => {
    const out = new Set<SetupSetting>();
    if (node.redis.evicting && opts.bugs.evictionUnnoticed !== true) out.add("maxmemory-policy");
    if (node.redis.connectedReplicas() > 1 && opts.bugs.lateReplicaUncovered !== true) out.add("replicas");
    return out;
  };
  /** Memory pressure: while the policy stays evicting on this server, the key is evicted every 50–400 ms. */
  const evictWhileEvicting = (node: Node, server: number): void => {
    if (!node.redis.evicting || node.server !== server) return;
    node.redis.evict();
    stats.evictions++;
    w.scheduleBreakpoints(node);
    clock.schedule(w.driftRng.int(50_000, 400_000), () => evictWhileEvicting(node, server));
  };
  return {
    watchSetup(node, drift, localUs) {
      const now = unsafeSettings(node);
      for (const setting of SETUP_SETTINGS) {
        if (drift.has(setting) === now.has(setting)) continue;
        if (setting === "maxmemory-policy") node.redis.rotate(localUs);
        if (now.has(setting)) drift.add(setting);
        else drift.delete(setting);
      }
      w.scheduleBreakpoints(node);
      if (node.redis.evicting && !node.pressure) {
        node.pressure = true;
        evictWhileEvicting(node, node.server);
      }
    },
    promoted(node) {
      node.server++;
      node.pressure = false;
    },
  };
}
