// The Redis snapshot `gq:policy` (the contract between a region's daemon and
// its limiters, docs/design.md §3.4) and the rollout state a daemon sends its peers.
// Both are validated with zod; bad input is an error naming the field, never
// a throw.
import { z } from "zod";
import { compareIds, DIGEST_PATTERN, type DocId, idKey, idOf, type PolicyDoc, sameId } from "./doc.js";
import {
  type AckRegister,
  effectiveDocs,
  type PeerState,
  type Phase,
  phaseOf,
  type RegionState,
  type SharedState,
  targetOf,
} from "./state.js";

// 2: ids carry the document's digest (issue 21). A format-1 snapshot is
// refused as invalid: its daemon starts a new epoch and adopts its peers' state.
export const SNAPSHOT_FORMAT = 2;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const name = (what: string) => z.string({ error: `expected ${what}` }).regex(NAME, `expected ${what}`);
const uint = z
  .number({ error: "expected an integer ≥ 0" })
  .int("expected an integer ≥ 0")
  .min(0, "expected an integer ≥ 0")
  .max(Number.MAX_SAFE_INTEGER, "expected a safe integer");

const digest = z
  .string({ error: "expected a digest (32 hex digits)" })
  .regex(DIGEST_PATTERN, "expected a digest (32 hex digits)");

export const DocIdSchema = z.strictObject({
  version: uint,
  origin: name("an origin (region id or seed)"),
  digest,
});

export const PolicyDocSchema = z.strictObject({
  version: uint,
  origin: name("an origin (region id or seed)"),
  digest,
  proposalId: z.string().min(1).max(128).optional(),
  proposedAtMs: z.number().refine(Number.isFinite, "expected a finite number"),
  policies: z.unknown().refine((v) => v !== undefined && v !== null, "expected the policies file JSON"),
  stamps: z
    .record(
      z.string().min(1).max(600),
      z.strictObject({ v: uint, o: name("an origin (region id)"), p: z.string().min(1).max(128) }),
    )
    .optional(),
});

const AckSchema = z.strictObject({ acked: DocIdSchema.nullable(), epoch: uint });

export const SnapshotSchema = z.strictObject({
  format: z.literal(SNAPSHOT_FORMAT, { error: `expected format ${SNAPSHOT_FORMAT}` }),
  region: name("a region id"),
  seq: uint,
  epoch: uint,
  target: DocIdSchema,
  completed: DocIdSchema,
  docs: z.array(PolicyDocSchema).min(1, "expected at least the completed document").max(1000),
  regions: z.record(name("a region id"), AckSchema),
  allAckedAtUs: uint.nullable(),
  growAtUs: uint.nullable(),
  phase: z.enum(["stable", "rolling_out", "waiting"]),
});

export type Snapshot = z.output<typeof SnapshotSchema>;

export type Decoded<T> = { ok: true; value: T } | { ok: false; error: string };

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out === "" ? "(root)" : out;
}

function issues(error: z.ZodError): string {
  return error.issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join("; ");
}

/** Parses and validates the snapshot JSON (as read from `gq:policy`). */
export function decodeSnapshot(raw: string): Decoded<Snapshot> {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { ok: false, error: `policy snapshot: not JSON (${(err as Error).message})` };
  }
  const r = SnapshotSchema.safeParse(json);
  if (!r.success) return { ok: false, error: `policy snapshot: ${issues(r.error)}` };
  const s = r.data;
  const first = s.docs[0] as PolicyDoc;
  if (!sameId(first, s.completed))
    return { ok: false, error: "policy snapshot: docs[0]: expected the completed document" };
  for (let i = 1; i < s.docs.length; i++) {
    if (compareIds(s.docs[i - 1] as DocId, s.docs[i] as DocId) >= 0)
      return { ok: false, error: `policy snapshot: docs[${i}]: expected ids in ascending order` };
  }
  const last = s.docs[s.docs.length - 1] as DocId;
  if (!sameId(idOf(last), s.target))
    return { ok: false, error: "policy snapshot: target: expected the newest document's id" };
  return { ok: true, value: s };
}

/** The snapshot of a known region (seq: the daemon's write counter; waitUs = D + 2ε). */
export function snapshotOf(r: RegionState, seq: number, waitUs: number): Snapshot {
  const docs = effectiveDocs(r);
  const target = targetOf(r);
  const regions: Snapshot["regions"] = {};
  for (const id of r.regions) {
    const reg = r.shared.acked.get(id);
    regions[id] = { acked: reg?.id ?? null, epoch: reg?.epoch ?? 0 };
  }
  const allAckedAtUs = r.allAcked !== null && sameId(r.allAcked.target, target) ? r.allAcked.atUs : null;
  const phase: Phase = phaseOf(r);
  return {
    format: SNAPSHOT_FORMAT,
    region: r.region,
    seq,
    epoch: r.epoch,
    target: idOf(target),
    completed: idOf(r.completed),
    docs: docs as Snapshot["docs"],
    regions,
    allAckedAtUs,
    growAtUs: allAckedAtUs === null ? null : allAckedAtUs + waitUs,
    phase,
  };
}

export function encodeSnapshot(s: Snapshot): string {
  return JSON.stringify(s);
}

/** The region state a snapshot holds (a daemon restarting over its Redis). */
export function stateFromSnapshot(s: Snapshot, regions: readonly string[]): Decoded<RegionState> {
  if (!regions.includes(s.region))
    return { ok: false, error: `policy snapshot: region: ${s.region} is not configured` };
  const docs = new Map<string, PolicyDoc>();
  for (const d of s.docs) docs.set(idKey(d), d as PolicyDoc);
  const acked = new Map<string, AckRegister>();
  for (const [id, a] of Object.entries(s.regions)) {
    if (regions.includes(id)) acked.set(id, { epoch: a.epoch, id: a.acked });
  }
  return {
    ok: true,
    value: {
      region: s.region,
      regions,
      epoch: s.epoch,
      completed: s.completed,
      shared: { docs, acked },
      allAcked: s.allAckedAtUs === null ? null : { target: s.target, atUs: s.allAckedAtUs },
    },
  };
}

// ---- the state peers exchange (carried in a gossip frame; the frame codec is msgpack) ----

export const PeerStateSchema = z.strictObject({
  completed: DocIdSchema,
  docs: z.array(PolicyDocSchema).max(1000),
  acked: z.record(name("a region id"), z.strictObject({ epoch: uint, id: DocIdSchema.nullable() })),
});

export type PeerStateWire = z.output<typeof PeerStateSchema>;

export function peerStateToWire(p: PeerState): PeerStateWire {
  const acked: PeerStateWire["acked"] = {};
  for (const [id, reg] of p.shared.acked)
    acked[id] = { epoch: reg.epoch, id: reg.id === null ? null : idOf(reg.id) };
  return { completed: idOf(p.completed), docs: [...p.shared.docs.values()] as PeerStateWire["docs"], acked };
}

/**
 * Validates a peer's state. An ack of a doc the state lacks is kept (it can
 * only be below the target, and completion compares acks with the target).
 */
export function peerStateFromWire(raw: unknown): Decoded<PeerState> {
  const r = PeerStateSchema.safeParse(raw);
  if (!r.success) return { ok: false, error: `rollout state: ${issues(r.error)}` };
  const docs = new Map<string, PolicyDoc>();
  for (const d of r.data.docs) docs.set(idKey(d), d as PolicyDoc);
  if (!docs.has(idKey(r.data.completed)))
    return { ok: false, error: "rollout state: completed: its document is missing" };
  const acked = new Map<string, AckRegister>();
  for (const [id, a] of Object.entries(r.data.acked)) acked.set(id, a);
  const shared: SharedState = { docs, acked };
  return { ok: true, value: { completed: r.data.completed, shared } };
}
