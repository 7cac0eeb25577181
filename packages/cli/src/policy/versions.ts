// Policy versions as the CLI reads and compares them (docs/design.md §3.4):
// `v<version>@<origin>#<digest>` (the admin API's ETag; a digest prefix of
// at least 8 digits will do), ordered by version, origin, then digest — the
// daemons' order. `status --wait` waits for a given version in every region
// (issue 22): the asked region completed it or a later one, and every region's
// acknowledgement it shows is at it or later, so a change made through another
// region is never reported done before it arrived.
import { entryPart } from "@geoquota/rollout";
import { UsageError } from "../errors.js";

export interface VersionId {
  readonly version: number;
  readonly origin: string;
  readonly digest: string;
}

export interface PolicyState {
  readonly region: string;
  readonly replicated: boolean;
  readonly phase: string;
  readonly target: VersionId | null;
  readonly completed: VersionId | null;
  readonly growAtUs: number | null;
  readonly policies: Record<string, unknown> | null;
  readonly stamps?: Readonly<Record<string, { v: number; o: string; p: string }>> | null;
  readonly regions: readonly { id: string; acked: VersionId | null }[];
}

/** Full form (what If-Match takes). */
export const fullId = (v: VersionId): string => `v${v.version}@${v.origin}#${v.digest}`;
/** Short form for people: 8 digest digits. */
export const shortId = (v: VersionId | null | undefined): string =>
  v ? `v${v.version}@${v.origin}#${v.digest.slice(0, 8)}` : "none";

const PATTERN = /^v(\d+)@([A-Za-z0-9][A-Za-z0-9._-]{0,63})#([0-9a-f]{8,32})$/;

export function parseVersion(flag: string, text: string): VersionId {
  const m = PATTERN.exec(text.trim());
  if (m === null)
    throw new UsageError(
      `${flag}: expected a version like v3@us-east#1f2e3d4c (as \`policy get\` prints it)`,
    );
  return { version: Number(m[1]), origin: m[2] as string, digest: m[3] as string };
}

/** Compares `a` with `b`; a digest prefix in `b` matches any digest it starts. */
export function compareVersions(a: VersionId, b: VersionId): number {
  if (a.version !== b.version) return a.version < b.version ? -1 : 1;
  if (a.origin !== b.origin) return a.origin < b.origin ? -1 : 1;
  const ad = a.digest.slice(0, b.digest.length);
  return ad < b.digest ? -1 : ad > b.digest ? 1 : 0;
}

const atLeast = (v: VersionId | null | undefined, want: VersionId) =>
  v != null && compareVersions(v, want) >= 0;

/**
 * `want` (or, without it, the asked region's own target) has arrived
 * everywhere: completed here at it or later, every region acked at it or later.
 */
export function settledAt(s: PolicyState, want?: VersionId): boolean {
  const target = want ?? s.target;
  if (target === null) return false;
  return atLeast(s.completed, target) && s.regions.every((r) => atLeast(r.acked, target));
}

/**
 * Whether the edit `proposalId` of entry (tenant, resource) holds in the
 * state's target: "kept", or the winning edit's stamp when a concurrent edit
 * of the same entry won (undefined: the state carries no stamps).
 */
export function editOutcome(
  s: PolicyState,
  tenant: string,
  resource: string,
  proposalId: string,
): "kept" | { v: number; o: string; p: string } | undefined {
  const stamp = s.stamps?.[entryPart(tenant, resource)];
  if (s.stamps == null || stamp === undefined) return undefined;
  return stamp.p === proposalId ? "kept" : stamp;
}
