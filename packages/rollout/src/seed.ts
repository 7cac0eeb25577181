// The seed snapshot of a brand-new region: version 0 origin "seed", the
// policies file, completed everywhere. The CLI orchestrator writes it after
// initFreshRegion, so a local cluster starts without waiting for its peers.
import { idKey, idOf, type PolicyDoc, seedDoc } from "./doc.js";
import { encodeSnapshot, snapshotOf } from "./snapshot.js";
import type { AckRegister, RegionState } from "./state.js";
import { type RedisLike, SNAPSHOT_KEY } from "./store.js";

export function seedState(region: string, regions: readonly string[], policiesRaw: unknown): RegionState {
  const doc: PolicyDoc = seedDoc(policiesRaw);
  const acked = new Map<string, AckRegister>();
  for (const id of regions) acked.set(id, { epoch: 0, id: idOf(doc) });
  return {
    region,
    regions,
    epoch: 0,
    completed: idOf(doc),
    allAcked: null,
    shared: { docs: new Map([[idKey(doc), doc]]), acked },
  };
}

/** Writes the seed snapshot unless the region already has one (SET NX). True when written. */
export async function seedSnapshot(
  redis: RedisLike,
  policiesRaw: unknown,
  where: { region: string; regions: readonly string[] },
): Promise<boolean> {
  const raw = encodeSnapshot(snapshotOf(seedState(where.region, where.regions, policiesRaw), 1, 0));
  return (await redis.set(SNAPSHOT_KEY, raw, "NX")) === "OK";
}
