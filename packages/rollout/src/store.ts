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
 * Writes the snapshot; with replicas, `WAIT replicas timeoutMs` on the same
 * connection right after (DESIGN §4: what limiters act on must survive a
 * failover). Resolves whether every replica acknowledged it.
 */
export async function writeSnapshot(
  redis: RedisLike,
  raw: string,
  options: { replicas: number; waitTimeoutMs?: number },
): Promise<boolean> {
  if (options.replicas <= 0) {
    await redis.set(SNAPSHOT_KEY, raw);
    return true;
  }
  const replies = await redis
    .pipeline()
    .set(SNAPSHOT_KEY, raw)
    .wait(options.replicas, options.waitTimeoutMs ?? 100)
    .exec();
  const set = replies?.[0];
  const waited = replies?.[1];
  if (!set || set[0] || !waited || waited[0]) return false;
  return Number(waited[1]) >= options.replicas;
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
