// The rollout's Redis keys (the only module that names them):
//   gq:policy            the region's snapshot (JSON, snapshot.ts), written by its daemon
//   gq:policy:proposals  a list of proposals `{proposalId, policies | entry, at}` (JSON), pushed
//                        by the admin API or the daemon's SIGHUP reload, popped by the daemon
import type { Cluster, Redis } from "ioredis";
import { z } from "zod";
import { type Decoded, decodeSnapshot, type Snapshot } from "./snapshot.js";

export type RedisLike = Redis | Cluster;

export const SNAPSHOT_KEY = "gq:policy";
export const PROPOSALS_KEY = "gq:policy:proposals";

/** The snapshot as stored (raw JSON, so a daemon can see whether Redis still holds its last write). */
export async function readSnapshotRaw(redis: RedisLike): Promise<string | null> {
  return redis.get(SNAPSHOT_KEY);
}

/** null: no snapshot (a fresh or wiped Redis: policy unknown). A bad one is an error naming the field. */
export async function readSnapshot(redis: RedisLike): Promise<Decoded<Snapshot> | null> {
  const raw = await readSnapshotRaw(redis);
  return raw === null ? null : decodeSnapshot(raw);
}

/**
 * A snapshot reader for a poller (a replicated region's limiter reads `gq:policy` every
 * staleMs / 4): the text is decoded only when it differs from the last one read, and the same
 * decoded value (never changed by its readers) is handed back otherwise. Decoding validates
 * the whole snapshot with zod; done on every poll it was most of an idle limiter's CPU and
 * allocation (≈ 2 KB of JSON, 4 times a second: ≈ 240 KB/s, now ≈ 70 KB/s), and allocation is
 * what keeps V8 from giving back an idle process's young generation (bench section 9).
 */
export function snapshotReader(redis: RedisLike): () => Promise<Decoded<Snapshot> | null> {
  let lastRaw: string | null = null;
  let last: Decoded<Snapshot> | null = null;
  return async () => {
    const raw = await readSnapshotRaw(redis);
    if (raw === null) return null;
    if (raw !== lastRaw || last === null) {
      last = decodeSnapshot(raw);
      lastRaw = raw;
    }
    return last;
  };
}

/**
 * Runs `write` (one command on `redis`) and resolves whether a durability
 * certificate covers it (DESIGN §4 "Durability certificates": a WAIT answered
 * on the connection that carried the write, with no reconnect in between,
 * acked by every configured and connected replica). The daemon passes
 * @geoquota/redis's certifier; this package knows no connection generations.
 */
export type CertifiedWrite = (
  place: { readonly key: string },
  write: () => Promise<unknown>,
) => Promise<boolean>;

/**
 * Writes the snapshot. With replicas it resolves true only when
 * `options.certified` certifies the write (what limiters act on must survive
 * a failover, also one behind an unchanged address); without a certifier
 * nothing can prove it durable: false.
 */
export async function writeSnapshot(
  redis: RedisLike,
  raw: string,
  options: { replicas: number; certified?: CertifiedWrite },
): Promise<boolean> {
  const write = () => redis.set(SNAPSHOT_KEY, raw);
  if (options.replicas <= 0) {
    await write();
    return true;
  }
  if (options.certified === undefined) {
    await write();
    return false;
  }
  return options.certified({ key: SNAPSHOT_KEY }, write);
}

export const ProposalSchema = z
  .strictObject({
    proposalId: z.string().min(1).max(128),
    /** A whole policies document. */
    policies: z.unknown().optional(),
    /** Or one entry (tenant "*": the resource's default): its spec, or null to remove it. */
    entry: z
      .strictObject({
        tenant: z.string().min(1).max(1024),
        resource: z.string().min(1).max(1024),
        spec: z.record(z.string(), z.unknown()).nullable(),
      })
      .optional(),
    at: z.number(),
  })
  .refine((p) => (p.policies === undefined) !== (p.entry === undefined), {
    message: "expected exactly one of policies or entry",
  });
export type Proposal = z.output<typeof ProposalSchema>;

export async function pushProposal(redis: RedisLike, proposal: Proposal): Promise<void> {
  await redis.rpush(PROPOSALS_KEY, JSON.stringify(proposal));
}

/** Up to `max` proposals, oldest first; a malformed entry comes back as an error (and is consumed). */
export async function popProposals(redis: RedisLike, max: number): Promise<Decoded<Proposal>[]> {
  const out: Decoded<Proposal>[] = [];
  for (let i = 0; i < max; i++) {
    const raw = await redis.lpop(PROPOSALS_KEY);
    if (raw === null) break;
    out.push(decodeProposal(raw));
  }
  return out;
}

export function decodeProposal(raw: string): Decoded<Proposal> {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { ok: false, error: `policy proposal: not JSON (${(err as Error).message})` };
  }
  const r = ProposalSchema.safeParse(json);
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    return { ok: false, error: `policy proposal: ${msg}` };
  }
  return { ok: true, value: r.data };
}
