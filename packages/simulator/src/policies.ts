// The policies of a run: the spec in force at the start, the policies file a
// spec becomes (what the CLI seeds and a proposal carries), and what a region's
// limiters enforce from a replicated policy snapshot (issue 15): resolveEffective
// over the snapshot's documents, as the limiter's policy source does.
import { parsePolicies, type PolicySet, resolveEffective } from "@geoquota/config";
import { isRateAlgorithm, type KeyLimit, type KeyPolicy, SHARE_UNITS as U } from "@geoquota/core";
import type { RegionQuota } from "@geoquota/gossip";
import { decodeSnapshot, idKey } from "@geoquota/rollout";
import type { Rng } from "@geoquota/sim";
import { keyLimitOf, MODEL_RESOURCE, MODEL_TENANT } from "./store.js";
import type { ModelOptions } from "./types.js";

export interface PolicySpec {
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly bases: readonly number[];
}

/** The policy a region's limiters enforce, with every region's quota (for the checkers). */
export interface PolicyView {
  readonly policy: KeyPolicy;
  readonly limit: KeyLimit;
  readonly regions: readonly RegionQuota[];
}

/** The policies file of a spec (regions/policies.json shape): weights are the bases (they sum to U). */
export function policiesFileOf(
  spec: PolicySpec,
  ids: readonly string[],
  algorithm: string,
  floorPpm: number,
  windowMs: number | undefined,
): unknown {
  const weights: Record<string, number> = {};
  ids.forEach((id, i) => {
    weights[id] = spec.bases[i] ?? 0;
  });
  return {
    default: {
      algorithm,
      capacity: spec.capacity,
      // A window algorithm's refill is derived (C per window); parsePolicies refuses one.
      ...(windowMs !== undefined ? { windowMs } : { refillPerSecond: spec.refillPerSecond }),
      weights,
      floorPpm,
    },
  };
}

export function basesFor(n: number, rng: Rng | undefined, floorPpm: number): number[] {
  if (rng === undefined) {
    return Array.from({ length: n }, (_, i) =>
      i === 0 ? U - Math.floor(U / n) * (n - 1) : Math.floor(U / n),
    );
  }
  // Random weights, each ≥ floor, summing to exactly U.
  const raw = Array.from({ length: n }, () => rng.int(1, 10));
  const total = raw.reduce((a, b) => a + b, 0);
  const spare = U - n * floorPpm;
  const out = raw.map((w) => floorPpm + Math.floor((spare * w) / total));
  out[0] = (out[0] ?? 0) + U - out.reduce((a, b) => a + b, 0);
  return out;
}

export interface Policies {
  /** A window algorithm (fixed window, sliding counter, sliding log): G1 is "one window ≤ C". */
  readonly windowAlg: boolean;
  readonly windowMs: number | undefined;
  /** The spec of the seed policies (equal bases). */
  readonly oldSpec: PolicySpec;
  /** The policies file the CLI seeds every region with. */
  readonly seedPolicies: unknown;
  parsePolicy(raw: unknown, label: string): PolicySet;
  /** The policy file of a later spec (a proposal's body). */
  fileOf(spec: PolicySpec): unknown;
  /** What a limiter of region `index` enforces from snapshot `raw`, and the proposal the snapshot completed. */
  viewOfSnapshot(index: number, raw: string): { view: PolicyView; completedProposal: string | undefined };
}

export function createPolicies(opts: ModelOptions, ids: readonly string[]): Policies {
  const n = ids.length;
  const windowAlg = !isRateAlgorithm(opts.algorithm);
  const windowMs = windowAlg ? (opts.windowMs ?? 1000) : undefined;
  const oldSpec: PolicySpec = {
    capacity: opts.capacity,
    refillPerSecond: opts.refillPerSecond,
    bases: basesFor(n, undefined, opts.floorPpm),
  };
  const parsePolicy = (raw: unknown, label: string): PolicySet => parsePolicies(raw, label, ids);
  const fileOf = (spec: PolicySpec) => policiesFileOf(spec, ids, opts.algorithm, opts.floorPpm, windowMs);
  const parsedDocs = new Map<string, PolicySet>();
  const snapshotViews = new Map<string, { view: PolicyView; completedProposal: string | undefined }>();
  const viewOfSnapshot = (index: number, raw: string) => {
    const cached = snapshotViews.get(`${index}\n${raw}`);
    if (cached !== undefined) return cached;
    const d = decodeSnapshot(raw);
    if (!d.ok) throw new Error(`model: ${d.error}`);
    const sets = d.value.docs.map((doc) => {
      const k = `${idKey(doc)}:${doc.proposalId ?? ""}`;
      let set = parsedDocs.get(k);
      if (set === undefined) {
        set = parsePolicy(doc.policies, idKey(doc));
        parsedDocs.set(k, set);
      }
      return set;
    });
    const resolve = (region: string) =>
      resolveEffective(sets, ids, region, MODEL_TENANT, MODEL_RESOURCE, { floorPpm: opts.floorPpm });
    const policy = resolve(ids[index] ?? "");
    const regions: RegionQuota[] = ids.map((region) => {
      const p = resolve(region);
      return { region, baseShare: p.baseShare, floorShare: p.floorShare };
    });
    const value = {
      view: { policy, limit: keyLimitOf(policy), regions },
      completedProposal: d.value.docs[0]?.proposalId,
    };
    if (snapshotViews.size > 10_000) snapshotViews.clear();
    snapshotViews.set(`${index}\n${raw}`, value);
    return value;
  };
  return { windowAlg, windowMs, oldSpec, seedPolicies: fileOf(oldSpec), parsePolicy, fileOf, viewOfSnapshot };
}
