// The daemon's rollout step (issue 15, docs/design.md §3.4; state and rules in
// @geoquota/rollout): each round it pops proposals, acks, completes (Redis
// TIME), and writes the region's policy snapshot when it changed or when
// Redis lost it; frames from peers are merged as they arrive. The daemon's
// own policy resolver enforces the meet of `effectiveSets()`.
//
// What leaves the region (issue 21, the loans' rule): peers are sent the state
// of the last snapshot write that was durable, never the state in memory. A
// proposal or an ack whose write was not durable may vanish in a failover
// (the promoted replica holds an older snapshot, the restarted daemon reads
// it); had it been sent, peers would count an ack this region no longer
// honours, and the next proposal would reuse its number.
import {
  ack,
  adopt,
  applyEdit,
  complete,
  type Edit,
  type Decoded,
  type DocId,
  effectiveDocs,
  encodeSnapshot,
  formatId,
  heardFrom,
  idKey,
  mergePeer,
  type PeerState,
  type PolicyDoc,
  type Proposal,
  peerView,
  phaseOf,
  propose,
  proposeMerge,
  type RegionState,
  resolveUnknown,
  sameId,
  seedDoc,
  snapshotOf,
  stateFromSnapshot,
  targetDoc,
  targetOf,
  type UnknownState,
  unknownState,
  unknownView,
  decodeSnapshot,
  verifyDoc,
} from "@geoquota/rollout";
import { type PolicySet, resolveEffective } from "@geoquota/config";
import { decodeRolloutFrame, encodeRolloutFrame } from "./rollout-frame.js";
import { windowChangeMs } from "./window-wait.js";
import { type PolicyResolver, quotaInterner } from "./store-port.js";

/** What the rollout needs from the region's Redis (store.ts of @geoquota/rollout; the model in the simulation). */
export interface RolloutPort {
  readSnapshotRaw(): Promise<string | null>;
  /** Resolves whether the write is durable (WAIT covered it when the region has replicas). */
  writeSnapshot(raw: string): Promise<boolean>;
  popProposals(max: number): Promise<Decoded<Proposal>[]>;
  /** Redis TIME, µs. */
  timeUs(): Promise<number>;
}

export interface RolloutOptions {
  readonly region: string;
  readonly regions: readonly string[];
  readonly limiterStaleMs: number;
  /** D + 2ε, µs: growth waits this long after every region acked. */
  readonly waitUs: number;
  /**
   * 2ε, µs (the clock offset between regions): when the rollout changes a window-algorithm key,
   * growth waits its window W plus this on top of `waitUs` (window-wait.ts, docs/design.md §3.5).
   */
  readonly windowMarginUs: number;
  /** The policies file: the seed of a fresh cluster. */
  readonly seedPolicies: () => unknown;
  /** Validates a policies document (parsePolicies with the configured regions); throws naming the field. */
  readonly parse: (raw: unknown, label: string) => PolicySet;
  /** Monotonic ms. */
  readonly now: () => number;
  readonly log?: (level: "info" | "warn" | "error", event: string, fields: Record<string, unknown>) => void;
}

export interface RolloutStatus {
  known: boolean;
  target: DocId | null;
  completed: DocId | null;
  phase: "stable" | "rolling_out" | "waiting" | "unknown";
  acked: Record<string, { epoch: number; id: DocId | null }>;
  snapshotSeq: number;
}

type St = { kind: "starting" } | { kind: "unknown"; u: UnknownState } | { kind: "known"; r: RegionState };

const PROPOSALS_PER_ROUND = 16;

export class RolloutStep {
  private st: St = { kind: "starting" };
  private applied: { target: DocId; atMs: number } | null = null;
  /** The state of the last durable snapshot write: what peers are sent (null: none yet). */
  private shipped: RegionState | null = null;
  private lastRaw: string | null = null;
  private lastContent: string | null = null;
  private seq = 0;
  private readonly parsed = new Map<string, PolicySet>();
  private waits: { key: string; us: number } | undefined;
  private sets: { key: string; sets: PolicySet[] } | undefined;
  /** Bumped whenever the effective documents change (resolver caches key on it). */
  generation = 0;

  constructor(
    private readonly o: RolloutOptions,
    private readonly port: RolloutPort,
  ) {}

  get known(): boolean {
    return this.st.kind === "known";
  }

  private log(level: "info" | "warn" | "error", event: string, fields: Record<string, unknown>): void {
    this.o.log?.(level, event, fields);
  }

  private parseDoc(d: PolicyDoc): PolicySet {
    const k = idKey(d);
    let set = this.parsed.get(k);
    if (set === undefined) {
      // A doc met for the first time (the cache is keyed by the whole id):
      // its content must be what its id names.
      const wrong = verifyDoc(d);
      if (wrong !== undefined) throw new Error(wrong);
      set = this.o.parse(d.policies, `policy ${formatId(d)}`);
      this.parsed.set(k, set);
    }
    return set;
  }

  /**
   * The growth wait of `r`'s target: D + 2ε, and when some older effective document resolves a
   * window-algorithm key otherwise, the longest such window + 2ε more (window-wait.ts).
   */
  private growWaitUs(r: RegionState): number {
    const docs = effectiveDocs(r);
    const key = docs.map(idKey).join(",");
    if (this.waits?.key === key) return this.waits.us;
    const target = docs[docs.length - 1] as PolicyDoc;
    let ms = 0;
    for (const d of docs.slice(0, -1))
      ms = Math.max(ms, windowChangeMs(this.parseDoc(d), this.parseDoc(target)));
    const us = this.o.waitUs + (ms > 0 ? ms * 1000 + this.o.windowMarginUs : 0);
    this.waits = { key, us };
    return us;
  }

  /** An error naming the doc and field when some doc of `docs` is not a valid policies file here. */
  private invalidDoc(docs: Iterable<PolicyDoc>): string | undefined {
    for (const d of docs) {
      try {
        this.parseDoc(d);
      } catch (err) {
        return (err as Error).message;
      }
    }
    return undefined;
  }

  private setKnown(r: RegionState): void {
    const was = this.st.kind === "known" ? this.st.r : undefined;
    this.st = { kind: "known", r };
    const key = effectiveDocs(r).map(idKey).join(",");
    if (this.sets?.key !== key) {
      this.sets = { key, sets: effectiveDocs(r).map((d) => this.parseDoc(d)) };
      this.generation++;
    }
    if (was !== undefined && !sameId(was.completed, r.completed))
      this.log("info", "policy_completed", { version: r.completed.version, origin: r.completed.origin });
    // Pruned docs are never needed again.
    if (this.parsed.size > 64)
      for (const k of [...this.parsed.keys()]) if (!r.shared.docs.has(k)) this.parsed.delete(k);
  }

  /** The policy sets the region enforces the meet of (undefined: unknown, enforce nothing). */
  effectiveSets(): readonly PolicySet[] | undefined {
    return this.st.kind === "known" ? this.sets?.sets : undefined;
  }

  /**
   * The state peers are sent: known, the state of the last durable snapshot
   * write (undefined before the first: send nothing, since null would tell an
   * unknown peer that this region is unknown too); unknown, null or the join
   * adopted so far (held in memory only: a restart starts a newer epoch).
   */
  outgoing(): PeerState | null | undefined {
    if (this.st.kind === "known") return this.shipped === null ? undefined : peerView(this.shipped);
    if (this.st.kind === "unknown") return unknownView(this.st.u);
    return undefined;
  }

  outgoingFrame(): Uint8Array | undefined {
    const state = this.outgoing();
    return state === undefined ? undefined : encodeRolloutFrame(this.o.region, state);
  }

  /**
   * A rollout frame from the authenticated `peer`: `error` when it was
   * dropped; `reply` when the peer should get our state at once rather than
   * next round (it announced a new epoch, or it does not carry ours yet), so
   * that a region that lost everything is confirmed within a round trip.
   */
  onFrame(peer: string, bytes: Uint8Array): { error?: string; reply: boolean } {
    const f = decodeRolloutFrame(bytes);
    if (!f.ok) return { error: f.error, reply: false };
    if (f.value.from !== peer) return { error: "GQ_ERR_FORGED_SENDER", reply: false };
    if (!this.o.regions.includes(peer) || peer === this.o.region)
      return { error: `rollout frame: ${peer} is not a peer`, reply: false };
    const state = f.value.state;
    if (state !== null) {
      const bad = this.invalidDoc(state.shared.docs.values());
      if (bad !== undefined) return { error: `rollout frame: ${bad}`, reply: false };
    }
    if (this.st.kind === "known") {
      if (state === null) return { reply: false };
      const before = this.st.r.shared.acked.get(peer)?.epoch;
      const r = mergePeer(this.st.r, state);
      this.setKnown(r);
      return { reply: r.shared.acked.get(peer)?.epoch !== before };
    }
    if (this.st.kind === "unknown") {
      const u = heardFrom(this.st.u, peer, state);
      this.st = { kind: "unknown", u };
      this.tryResolve();
      const carries = state !== null && (state.shared.acked.get(this.o.region)?.epoch ?? -1) >= u.epoch;
      return { reply: state !== null && !carries };
    }
    return { reply: false };
  }

  private tryResolve(): void {
    if (this.st.kind !== "unknown") return;
    let seed: PolicyDoc;
    try {
      const raw = this.o.seedPolicies();
      this.o.parse(raw, "policies file");
      seed = seedDoc(raw);
    } catch (err) {
      this.log("error", "policy_seed_invalid", { error: (err as Error).message });
      return;
    }
    const r = resolveUnknown(this.st.u, seed);
    if (r === null) return;
    const bad = this.invalidDoc(effectiveDocs(r));
    if (bad !== undefined) {
      this.log("error", "policy_adopt_invalid", { error: bad });
      return;
    }
    this.log("info", "policy_known", {
      completed: formatId(r.completed),
      target: formatId(targetOf(r)),
      seeded: this.st.u.adopted === null,
    });
    this.setKnown(r);
  }

  private async init(): Promise<void> {
    const raw = await this.port.readSnapshotRaw();
    if (raw !== null) {
      const d = decodeSnapshot(raw);
      const s = d.ok ? stateFromSnapshot(d.value, this.o.regions) : d;
      const region =
        d.ok && d.value.region !== this.o.region ? `snapshot of region ${d.value.region}` : undefined;
      const bad = s.ok ? (region ?? this.invalidDoc(s.value.shared.docs.values())) : s.error;
      if (s.ok && bad === undefined && d.ok) {
        this.seq = d.value.seq;
        this.lastRaw = raw;
        // Limiters may have read it already; counting from now is conservative.
        this.applied = { target: targetOf(s.value), atMs: this.o.now() };
        // Not lastContent: the snapshot found may be one whose write was not
        // durable. The first round writes it again, and peers hear of it only
        // once that write is durable.
        this.lastContent = null;
        this.setKnown(s.value);
        return;
      }
      this.log("error", "policy_snapshot_invalid", { error: bad });
    }
    // Nothing usable in Redis and nothing in memory: unknown, in a new epoch.
    this.st = { kind: "unknown", u: unknownState(this.o.region, this.o.regions, await this.port.timeUs()) };
    this.log("warn", "policy_unknown", { reason: raw === null ? "no snapshot" : "invalid snapshot" });
    this.tryResolve();
  }

  /** One round: start, proposals, ack, completion, snapshot. */
  async round(): Promise<void> {
    if (this.st.kind === "starting") await this.init();
    if (this.st.kind === "unknown") this.tryResolve();
    if (this.st.kind !== "known") return;
    await this.takeProposals();
    this.mergeConcurrent();
    const nowUs = await this.port.timeUs();
    let r = (this.st as { r: RegionState }).r;
    r = ack(r, this.applied, this.o.now(), this.o.limiterStaleMs);
    r = complete(r, nowUs, this.growWaitUs(r));
    this.setKnown(r);
    await this.writeIfNeeded();
  }

  private async takeProposals(): Promise<void> {
    const got = await this.port.popProposals(PROPOSALS_PER_ROUND);
    for (const p of got) {
      if (!p.ok) {
        this.log("warn", "policy_proposal_refused", { error: p.error });
        continue;
      }
      if (this.st.kind !== "known") return;
      const { proposalId, entry } = p.value;
      const edit: Edit =
        entry === undefined
          ? { kind: "doc", policies: p.value.policies }
          : { kind: "entry", tenant: entry.tenant, resource: entry.resource, spec: entry.spec };
      // An entry edit lands on the newest known document (issue 22), so it
      // is validated as the document it makes here.
      const next = applyEdit(targetDoc(this.st.r), edit);
      try {
        this.o.parse(next, `proposal ${proposalId}`);
      } catch (err) {
        this.log("warn", "policy_proposal_refused", { proposalId, error: (err as Error).message });
        continue;
      }
      const out = propose(this.st.r, next, { proposalId, nowMs: p.value.at, edit });
      if (out.doc === null) {
        this.log("info", "policy_proposal_unchanged", { proposalId });
        continue;
      }
      this.parseDoc(out.doc);
      this.setKnown(out.state);
      this.log("info", "policy_proposed", { proposalId, version: out.doc.version });
    }
  }

  /**
   * A concurrent edit made elsewhere that the target lacks: propose the merge
   * (each part from its highest stamp) on top, so that no edit is lost. A
   * merge that is no valid policies file keeps the target's content (the
   * lower edits lost, logged naming them).
   */
  private mergeConcurrent(): void {
    if (this.st.kind !== "known") return;
    const m = proposeMerge(this.st.r, Date.now());
    if (m === null) return;
    let doc = m.merged;
    try {
      this.parseDoc(doc);
    } catch (err) {
      this.log("error", "policy_edit_lost", {
        error: (err as Error).message,
        lost: m.lost.map((d) => formatId(d)),
      });
      doc = m.fallback;
      this.parseDoc(doc);
    }
    this.setKnown(adopt(this.st.r, doc));
    this.log("info", "policy_merged", { version: doc.version, of: m.lost.map((d) => formatId(d)) });
  }

  private async writeIfNeeded(): Promise<void> {
    if (this.st.kind !== "known") return;
    const r = this.st.r;
    const content = encodeSnapshot(snapshotOf(r, 0, this.growWaitUs(r)));
    const inRedis = await this.port.readSnapshotRaw();
    if (content === this.lastContent && inRedis === this.lastRaw && inRedis !== null) return;
    if (inRedis !== this.lastRaw) this.log("warn", "policy_snapshot_rewritten", { lost: inRedis === null });
    this.seq++;
    const raw = encodeSnapshot(snapshotOf(r, this.seq, this.growWaitUs(r)));
    const durable = await this.port.writeSnapshot(raw);
    this.lastRaw = raw;
    if (!durable) return; // retried next round; no ack counts from it, nothing of it is sent
    this.lastContent = content;
    this.shipped = r;
    const target = targetOf(r);
    if (this.applied === null || !sameId(this.applied.target, target))
      this.applied = { target, atMs: this.o.now() };
  }

  status(): RolloutStatus {
    if (this.st.kind !== "known") {
      return {
        known: false,
        target: null,
        completed: null,
        phase: "unknown",
        acked: {},
        snapshotSeq: this.seq,
      };
    }
    const r = this.st.r;
    return {
      known: true,
      target: targetOf(r),
      completed: r.completed,
      phase: phaseOf(r),
      acked: Object.fromEntries(
        r.regions.map((id) => [id, r.shared.acked.get(id) ?? { epoch: 0, id: null }]),
      ),
      snapshotSeq: this.seq,
    };
  }
}

/** The daemon's policy resolver (the port in store-port.ts). */
export type EffectiveResolver = PolicyResolver;

/**
 * The daemon's policy resolver over the rollout: the meet (resolveEffective)
 * of the region's effective sets, for this region and every region's quota.
 * Throws while the policy is unknown (the daemon skips keys then).
 */
export function rolloutPolicyResolver(
  step: RolloutStep,
  where: {
    region: string;
    regions: readonly string[];
    floorPpm?: number;
    /** The stored form of a key part (keyPartHasher): keys come from Redis by their stored names. */
    hashPart?: (part: string) => string;
  },
): EffectiveResolver {
  const cache = new Map<string, ReturnType<EffectiveResolver["resolve"]>>();
  const intern = quotaInterner();
  let generation = -1;
  const opts = {
    ...(where.floorPpm !== undefined ? { floorPpm: where.floorPpm } : {}),
    ...(where.hashPart !== undefined ? { names: { hashPart: where.hashPart } } : {}),
  };
  return {
    resolve(tenant, resource) {
      const sets = step.effectiveSets();
      if (sets === undefined) throw new Error("policy unknown");
      if (generation !== step.generation) {
        cache.clear();
        generation = step.generation;
      }
      const k = `${tenant}|${resource}`;
      const hit = cache.get(k);
      if (hit) return hit;
      const policy = resolveEffective(sets, where.regions, where.region, tenant, resource, opts);
      const regions = intern(
        where.regions.map((id) => {
          const p = resolveEffective(sets, where.regions, id, tenant, resource, opts);
          return { region: id, baseShare: p.baseShare, floorShare: p.floorShare };
        }),
      );
      const value = { policy, regions };
      if (cache.size > 100_000) cache.clear();
      cache.set(k, value);
      return value;
    },
  };
}
