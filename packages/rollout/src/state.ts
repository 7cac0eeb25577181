// The replicated rollout state (issue 15, docs/design.md §3.4) and the local rules of
// one region. Pure: no I/O, no clocks; times are passed in.
//
// Shared (merged by gossip, a join-semilattice):
//   docs   id → PolicyDoc, a grow-only set (a region prunes ids below its own
//          completed one, locally, after merging);
//   acked  region → {epoch, id}, a max-register ordered by (epoch, id).
// Local to a region (persisted in its snapshot, never merged): completed,
// allAcked (when it first saw every region ack the target, Redis TIME µs),
// and its own epoch.
//
// The epoch (a change to the first rollout design, docs/design.md §3.4): a region that
// lost everything (no snapshot in Redis, none in memory) cannot know what it
// acknowledged before, so its old ack must stop counting. It starts a new
// epoch (its Redis TIME µs, above any epoch its peers show for it), whose
// register {epoch, null} dominates every old ack, and it enforces nothing
// until every peer has merged that register (then no region can complete
// anything on the strength of its old acks, and any doc a peer completed in
// the meantime reached it with that peer's state).
import {
  canonicalJson,
  compareIds,
  compareMaybeIds,
  type DocId,
  idKey,
  idOf,
  makeDoc,
  type PolicyDoc,
  sameId,
} from "./doc.js";
import {
  assemble,
  changedParts,
  entryPart,
  mergeParts,
  partsOf,
  reflects,
  type Stamp,
  stampEdit,
} from "./entries.js";

export interface AckRegister {
  readonly epoch: number;
  readonly id: DocId | null;
}

export function compareAcks(a: AckRegister, b: AckRegister): number {
  if (a.epoch !== b.epoch) return a.epoch < b.epoch ? -1 : 1;
  return compareMaybeIds(a.id, b.id);
}

export interface SharedState {
  readonly docs: ReadonlyMap<string, PolicyDoc>;
  readonly acked: ReadonlyMap<string, AckRegister>;
}

export const EMPTY_SHARED: SharedState = { docs: new Map(), acked: new Map() };

/**
 * The join: union of docs, max of each ack register. One id is one content
 * (the digest is in the id, checked before a doc enters a state), so a doc
 * already held is kept as it is.
 */
export function mergeShared(a: SharedState, b: SharedState): SharedState {
  const docs = new Map(a.docs);
  for (const [k, d] of b.docs) if (!docs.has(k)) docs.set(k, d);
  const acked = new Map(a.acked);
  for (const [r, reg] of b.acked) {
    const mine = acked.get(r);
    if (mine === undefined || compareAcks(reg, mine) > 0) acked.set(r, reg);
  }
  return { docs, acked };
}

/** Equality of shared states (tests, and "did the merge change anything"). */
export function sharedEquals(a: SharedState, b: SharedState): boolean {
  if (a.docs.size !== b.docs.size || a.acked.size !== b.acked.size) return false;
  for (const [k, d] of a.docs) {
    const o = b.docs.get(k);
    if (o === undefined || (o !== d && canonicalJson(o) !== canonicalJson(d))) return false;
  }
  for (const [r, reg] of a.acked) {
    const o = b.acked.get(r);
    if (o === undefined || compareAcks(o, reg) !== 0) return false;
  }
  return true;
}

/** Drops docs older than `completed` (a local step; the completed doc itself stays). */
export function pruneBelow(s: SharedState, completed: DocId): SharedState {
  let drop = false;
  for (const d of s.docs.values()) if (compareIds(d, completed) < 0) drop = true;
  if (!drop) return s;
  const docs = new Map<string, PolicyDoc>();
  for (const [k, d] of s.docs) if (compareIds(d, completed) >= 0) docs.set(k, d);
  return { docs, acked: s.acked };
}

export function maxDocId(s: SharedState): DocId | null {
  let max: DocId | null = null;
  for (const d of s.docs.values()) if (compareMaybeIds(d, max) > 0) max = idOf(d);
  return max;
}

/** A region whose policy is known: it enforces, writes its snapshot, acks and completes. */
export interface RegionState {
  readonly region: string;
  /** Every configured region (self included). */
  readonly regions: readonly string[];
  readonly epoch: number;
  readonly shared: SharedState;
  readonly completed: DocId;
  /** When this region first saw every region's ack equal `target` (its Redis TIME, µs). */
  readonly allAcked: { readonly target: DocId; readonly atUs: number } | null;
}

/** What a region sends its peers: docs from its completed one up, and every ack register. */
export interface PeerState {
  readonly completed: DocId;
  readonly shared: SharedState;
}

export type Phase = "stable" | "rolling_out" | "waiting";

/** The newest known version (the rollout's target). */
export function targetOf(r: RegionState): DocId {
  const m = maxDocId(r.shared);
  return m !== null && compareIds(m, r.completed) > 0 ? m : r.completed;
}

/**
 * The documents the region enforces the meet of: its completed doc, then every
 * newer known doc, ascending (docs/design.md §3.4).
 */
export function effectiveDocs(r: RegionState): PolicyDoc[] {
  const out = [...r.shared.docs.values()].filter((d) => compareIds(d, r.completed) >= 0);
  out.sort(compareIds);
  const first = out[0];
  if (first === undefined || !sameId(first, r.completed)) {
    throw new Error(`rollout state of ${r.region}: completed ${idKey(r.completed)} has no document`);
  }
  return out;
}

export function peerView(r: RegionState): PeerState {
  return { completed: r.completed, shared: pruneBelow(r.shared, r.completed) };
}

/** Merges a peer's state (the peer's completed id is not adopted: completion is local). */
export function mergePeer(r: RegionState, peer: PeerState): RegionState {
  const shared = pruneBelow(mergeShared(r.shared, peer.shared), r.completed);
  // A peer may show a later epoch of ours than we hold (our snapshot came
  // back older than what we had sent): continue from it, or our acks would
  // never dominate the register.
  const shown = shared.acked.get(r.region);
  let epoch = r.epoch;
  if (shown !== undefined && shown.epoch > epoch) epoch = shown.epoch;
  return { ...r, shared, epoch };
}

/** What a region is asked to propose (the proposals list, SIGHUP, the admin API). */
export type Edit =
  /** A whole policies document: stamps the parts it changes against the target. */
  | { readonly kind: "doc"; readonly policies: unknown }
  /** One entry (tenant "*": the resource's default) set to `spec`, or removed (null). */
  | {
      readonly kind: "entry";
      readonly tenant: string;
      readonly resource: string;
      readonly spec: Readonly<Record<string, unknown>> | null;
    };

function nextVersion(r: RegionState): number {
  let version = r.completed.version;
  for (const d of r.shared.docs.values()) version = Math.max(version, d.version);
  return version + 1;
}

/** The target's document. */
export function targetDoc(r: RegionState): PolicyDoc {
  const t = targetOf(r);
  const doc = r.shared.docs.get(idKey(t));
  if (doc === undefined) throw new Error(`rollout state of ${r.region}: target ${idKey(t)} has no document`);
  return doc;
}

/** The policies document `edit` makes of `base`. */
export function applyEdit(base: PolicyDoc, edit: Edit): unknown {
  if (edit.kind === "doc") return edit.policies;
  const parts = partsOf(base.policies);
  const part = entryPart(edit.tenant, edit.resource);
  if (edit.spec === null) parts.delete(part);
  else parts.set(part, { tenant: edit.tenant, resource: edit.resource, ...edit.spec });
  return assemble(parts);
}

function withDoc(r: RegionState, doc: PolicyDoc): RegionState {
  const docs = new Map(r.shared.docs);
  docs.set(idKey(doc), doc);
  return { ...r, shared: { docs, acked: r.shared.acked } };
}

/**
 * A proposal on top of the target: a new doc `{version: max known + 1, origin:
 * self, digest}` whose stamps mark the parts it changed; null when it changes
 * nothing. `policies` (the old form) is a whole-document edit.
 */
export function propose(
  r: RegionState,
  policies: unknown,
  meta: { proposalId?: string | undefined; nowMs: number; edit?: Edit },
): { state: RegionState; doc: PolicyDoc | null } {
  const base = targetDoc(r);
  const edit: Edit = meta.edit ?? { kind: "doc", policies };
  const next = applyEdit(base, edit);
  if (changedParts(base.policies, next).length === 0) return { state: r, doc: null };
  const version = nextVersion(r);
  const stamp: Stamp = { v: version, o: r.region, p: meta.proposalId ?? `${r.region}-${version}` };
  const doc: PolicyDoc = makeDoc({
    version,
    origin: r.region,
    ...(meta.proposalId !== undefined ? { proposalId: meta.proposalId } : {}),
    proposedAtMs: meta.nowMs,
    policies: next,
    stamps: stampEdit(base, next, stamp),
  });
  return { state: withDoc(r, doc), doc };
}

/** The known docs (from the completed one up) whose edits the target lacks. */
export function unreflected(r: RegionState): PolicyDoc[] {
  const t = targetDoc(r);
  return effectiveDocs(r).filter((d) => !reflects(t, d));
}

/**
 * When the target lacks an edit some other known doc holds (a concurrent edit
 * made elsewhere), the merge of them all as a new doc on top; null when the
 * target reflects everything. `fallback`: the target's content with the merged
 * stamps (the lower edits lost), for when the merged content is not a valid
 * policies file.
 */
export function proposeMerge(
  r: RegionState,
  nowMs: number,
): { merged: PolicyDoc; fallback: PolicyDoc; lost: PolicyDoc[] } | null {
  const lost = unreflected(r);
  if (lost.length === 0) return null;
  const t = targetDoc(r);
  const m = mergeParts([t, ...lost]);
  const version = nextVersion(r);
  const meta = { version, origin: r.region, proposalId: `merge-${r.region}-${version}`, proposedAtMs: nowMs };
  return {
    merged: makeDoc({ ...meta, policies: m.policies, stamps: m.stamps }),
    fallback: makeDoc({ ...meta, policies: t.policies, stamps: m.stamps }),
    lost,
  };
}

/** Adds a doc this region made (a merge) to its state. */
export function adopt(r: RegionState, doc: PolicyDoc): RegionState {
  return withDoc(r, doc);
}

/**
 * The ack rule: `acked[self] := target` once this region's limiters apply it,
 * i.e. `nowMs ≥ applied.atMs + limiterStaleMs` where `applied` is the first
 * durable snapshot write that contained the current target (monotonic ms).
 */
export function ack(
  r: RegionState,
  applied: { readonly target: DocId; readonly atMs: number } | null,
  nowMs: number,
  limiterStaleMs: number,
): RegionState {
  const target = targetOf(r);
  const mine = r.shared.acked.get(r.region);
  if (mine !== undefined && mine.epoch === r.epoch && sameId(mine.id, target)) return r;
  if (applied === null || !sameId(applied.target, target)) return r;
  if (nowMs < applied.atMs + limiterStaleMs) return r;
  // Never ack a target that lacks a concurrent edit this region knows: it
  // could complete, and prune that edit everywhere (issue 22).
  if (unreflected(r).length > 0) return r;
  const reg: AckRegister = { epoch: r.epoch, id: target };
  if (mine !== undefined && compareAcks(reg, mine) <= 0) return r;
  const acked = new Map(r.shared.acked);
  acked.set(r.region, reg);
  return { ...r, shared: { docs: r.shared.docs, acked } };
}

export function allAckedTarget(r: RegionState): boolean {
  const target = targetOf(r);
  return r.regions.every((id) => sameId(r.shared.acked.get(id)?.id ?? null, target));
}

/**
 * The completion (growth) rule, at Redis TIME `nowUs`: `completed := target`
 * once every configured region acks the target and `waitUs` (D + 2ε) has
 * passed since this region first saw that. Only the target is ever completed;
 * older docs are superseded.
 */
export function complete(r: RegionState, nowUs: number, waitUs: number): RegionState {
  const target = targetOf(r);
  if (sameId(target, r.completed)) return r.allAcked === null ? r : { ...r, allAcked: null };
  if (!allAckedTarget(r)) return r.allAcked === null ? r : { ...r, allAcked: null };
  if (r.allAcked === null || !sameId(r.allAcked.target, target)) {
    return { ...r, allAcked: { target, atUs: nowUs } };
  }
  if (nowUs < r.allAcked.atUs + waitUs) return r;
  return { ...r, completed: target, allAcked: null, shared: pruneBelow(r.shared, target) };
}

export function phaseOf(r: RegionState): Phase {
  if (sameId(targetOf(r), r.completed)) return "stable";
  return r.allAcked !== null && sameId(r.allAcked.target, targetOf(r)) ? "waiting" : "rolling_out";
}

// ---- a region that lost everything ----

/**
 * A region with no snapshot in Redis and none in memory. It writes nothing
 * (its limiters deny: policy unknown) until either every peer says it is
 * unknown too (a fresh cluster: adopt the seed), or every peer has sent a
 * known state that carries this region's new epoch (adopt the join of what
 * they sent, with the highest completed id among them).
 */
export interface UnknownState {
  readonly region: string;
  readonly regions: readonly string[];
  readonly epoch: number;
  /** The join of the known states heard so far, with our register {epoch, null}. */
  readonly adopted: PeerState | null;
  /** Per peer, its latest state ("unknown" when it sent null). */
  readonly heard: ReadonlyMap<string, PeerState | "unknown">;
}

export function unknownState(region: string, regions: readonly string[], epoch: number): UnknownState {
  return { region, regions, epoch, adopted: null, heard: new Map() };
}

function withOwnRegister(s: SharedState, region: string, epoch: number): SharedState {
  const mine = s.acked.get(region);
  if (mine !== undefined && mine.epoch >= epoch) return s;
  const acked = new Map(s.acked);
  acked.set(region, { epoch, id: null });
  return { docs: s.docs, acked };
}

/** What an unknown region sends: null, or (once it adopted something) the join it holds. */
export function unknownView(u: UnknownState): PeerState | null {
  return u.adopted;
}

export function heardFrom(u: UnknownState, peer: string, state: PeerState | null): UnknownState {
  const heard = new Map(u.heard);
  heard.set(peer, state ?? "unknown");
  if (state === null) return { ...u, heard };
  let epoch = u.epoch;
  const shown = state.shared.acked.get(u.region);
  // A register of ours from before the loss at or above our new epoch (clock
  // went back): step past it, or its old ack would still count.
  if (shown !== undefined && (shown.epoch > epoch || (shown.epoch === epoch && shown.id !== null))) {
    epoch = shown.epoch + 1;
  }
  const base = u.adopted ?? { completed: state.completed, shared: { docs: new Map(), acked: new Map() } };
  const completed = compareIds(state.completed, base.completed) > 0 ? state.completed : base.completed;
  const shared = withOwnRegister(
    pruneBelow(mergeShared(base.shared, state.shared), completed),
    u.region,
    epoch,
  );
  return { ...u, epoch, heard, adopted: { completed, shared } };
}

/** The known state an unknown region may move to now, or null to keep waiting. */
export function resolveUnknown(u: UnknownState, seed: PolicyDoc): RegionState | null {
  const peers = u.regions.filter((id) => id !== u.region);
  const latest = peers.map((p) => u.heard.get(p));
  if (u.adopted === null) {
    if (!latest.every((s) => s === "unknown")) return null;
    const docs = new Map<string, PolicyDoc>([[idKey(seed), seed]]);
    const acked = new Map<string, AckRegister>([[u.region, { epoch: u.epoch, id: null }]]);
    return {
      region: u.region,
      regions: u.regions,
      epoch: u.epoch,
      completed: idOf(seed),
      allAcked: null,
      shared: { docs, acked },
    };
  }
  const confirmed = latest.every(
    (s) => s !== undefined && s !== "unknown" && (s.shared.acked.get(u.region)?.epoch ?? -1) >= u.epoch,
  );
  if (!confirmed) return null;
  return {
    region: u.region,
    regions: u.regions,
    epoch: u.epoch,
    completed: u.adopted.completed,
    allAcked: null,
    shared: u.adopted.shared,
  };
}
