// Where a limiter's policies come from (docs/design.md §3.4).
//
// Replicated (a multi-region config): the region's gossip daemon owns the
// versioned policy state and writes a snapshot of it to the region's Redis;
// this poller reads it every limiterStaleMs / 4 and hands the limiter the
// versions to meet (the completed one and every newer one known). A snapshot
// is used only until (the instant its read was *sent*) + limiterStaleMs: the
// daemon acknowledges a version to the other regions only limiterStaleMs after
// writing it, so by then every limiter of the region enforces it or has
// stopped deciding. Proposals go to the daemon through Redis; the daemon
// numbers them.
//
// Static (one region, or `policy.replicated: false`): the policies file, and
// a change applies to this process at once — nobody else shares the limit.
import { randomUUID } from "node:crypto";
import {
  type AccessList,
  ConfigError,
  type PolicySet,
  type PolicySpec,
  parsePolicies,
  parseQuotaKey,
  sizingChange,
} from "@geoquota/config";
import { docDigest, type Snapshot } from "@geoquota/rollout";
import { LimiterError } from "./errors.js";

export interface VersionId {
  readonly version: number;
  readonly origin: string;
  /** The document's digest (@geoquota/rollout docDigest): one id, one content. */
  readonly digest: string;
}

/** What a limiter reads of the daemon's snapshot (`gq:policy`, @geoquota/rollout). */
export type RolloutView = Pick<Snapshot, "target" | "completed" | "phase" | "growAtUs" | "docs" | "regions">;

/** The answer of `GET /v1/policy` (and what the CLI prints). */
export interface PolicyState {
  readonly region: string;
  readonly replicated: boolean;
  /** "unknown": this limiter has no usable snapshot (it denies until it has one). */
  readonly phase: RolloutView["phase"] | "unknown";
  readonly target: VersionId | null;
  readonly completed: VersionId | null;
  readonly growAtUs: number | null;
  /** The target version's policies document. */
  readonly policies: unknown;
  /**
   * Per part of the target document (`policies:<tenant>/<resource>`, `default`, …), the
   * edit that last set it: `{v, o, p}` = version, origin, proposal id. An edit whose
   * proposal id is not there lost to a concurrent edit of the same part (issue 22).
   */
  readonly stamps: Readonly<Record<string, { v: number; o: string; p: string }>> | null;
  readonly regions: readonly { id: string; acked: VersionId | null }[];
}

export interface ProposeResult {
  readonly unchanged: boolean;
  readonly proposalId?: string;
  /** The version the daemon numbered the proposal as (absent: not numbered within the wait). */
  readonly proposed?: VersionId;
  /** After the daemon numbered the proposal (or the wait ran out: then the target is the old one). */
  readonly state: PolicyState;
}

/** What the admin routes use, replicated or static. */
export interface PolicyAdmin {
  state(): PolicyState;
  /**
   * Validates the whole document (refused whole, naming the field) and proposes it.
   * `ifMatch`: the version it was based on (`formatVersion`); refused (412) when the
   * target is another.
   */
  propose(policies: unknown, options?: { ifMatch?: string }): Promise<ProposeResult>;
  /**
   * Proposes one entry (tenant `*`: the resource's default) on top of the
   * newest document; `spec` null removes the entry (the key falls back to the
   * resource's default or the global one).
   */
  proposeEntry(
    tenant: string,
    resource: string,
    spec: Record<string, unknown> | null,
  ): Promise<ProposeResult>;
  stop(): void;
}

/** A version as `If-Match` and `ETag` carry it: `v<version>@<origin>#<digest>`. */
export function formatVersion(v: VersionId): string {
  return `v${v.version}@${v.origin}#${v.digest}`;
}

/**
 * 412 unless `ifMatch` names `current`: `v<version>@<origin>#<digest>`, a digest
 * prefix of 8 digits or more will do (quotes and `W/` allowed; `*`: any version).
 */
function checkIfMatch(ifMatch: string | undefined, current: VersionId | null): void {
  if (ifMatch === undefined) return;
  const want = ifMatch
    .trim()
    .replace(/^W\//, "")
    .replace(/^"(.*)"$/, "$1");
  if (want === "*" && current !== null) return;
  const m = /^v(\d+)@([^#]+)#([0-9a-f]{8,32})$/.exec(want);
  if (
    current !== null &&
    m !== null &&
    Number(m[1]) === current.version &&
    m[2] === current.origin &&
    current.digest.startsWith(m[3] as string)
  )
    return;
  throw new LimiterError(
    "GQ_ERR_POLICY_STALE",
    `If-Match: the document was based on ${want}, but the newest version is ${current === null ? "unknown" : formatVersion(current)}; read it again (GET /v1/policy), re-apply the change and retry`,
    { field: "If-Match" },
  );
}

/**
 * A policies document with the (tenant, resource) entry replaced (or added;
 * tenant `*` = the resource's default), or removed when `spec` is null.
 */
export function withEntry(
  doc: unknown,
  tenant: string,
  resource: string,
  spec: Record<string, unknown> | null,
): unknown {
  const d = doc as { policies?: Record<string, unknown>[] };
  const list = (d.policies ?? []).filter((p) => !(p.tenant === tenant && p.resource === resource));
  return { ...(doc as object), policies: spec === null ? list : [...list, { tenant, resource, ...spec }] };
}

/** The limiter's side of it. */
export interface PolicyTarget {
  setPolicies(sets: readonly PolicySet[]): void;
  /** Checks fail closed once the limiter's monotonic clock passes this (undefined: no limit). */
  setPolicyValidUntil(monoMs: number | undefined): void;
}

// The digest is part of the id: a cache keyed by (version, origin) alone
// would keep enforcing an older content under a reused number (issue 21).
const idOf = (v: VersionId): string => `v${v.version}@${v.origin}#${v.digest}`;
const sameId = (a: VersionId | null | undefined, b: VersionId | null | undefined): boolean =>
  a != null && b != null && a.version === b.version && a.origin === b.origin && a.digest === b.digest;

/** Parses a proposed document against the configured regions; a bad one is a 400 naming the field. */
export function validatePolicies(raw: unknown, regionIds: readonly string[], label = "policies"): PolicySet {
  try {
    return parsePolicies(raw, label, regionIds);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const first = err.issues[0] ?? "(root): invalid";
    throw new LimiterError("GQ_ERR_INVALID_POLICY", first, {
      field: first.slice(0, first.indexOf(":")),
    });
  }
}

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );

export interface ReplicatedDeps {
  readonly region: string;
  readonly regionIds: readonly string[];
  readonly staleMs: number;
  /** Reads the daemon's snapshot; null when there is none (yet). */
  read(): Promise<RolloutView | null>;
  /** Hands a proposal to the daemon: a whole document, or one entry. */
  push(
    proposal: { proposalId: string; at: number } & (
      | { policies: unknown }
      | { entry: { tenant: string; resource: string; spec: Record<string, unknown> | null } }
    ),
  ): Promise<void>;
  readonly target: PolicyTarget;
  /** Monotonic ms. */
  readonly now: () => number;
  readonly onEvent?: (
    event: "policy_version" | "policy_read_failed" | "policy_invalid",
    detail: object,
  ) => void;
  /** How long propose() waits for the daemon to number the proposal. */
  readonly proposeWaitMs?: number;
}

/** The poller of the daemon's snapshot, and proposals through it. */
export class ReplicatedPolicies implements PolicyAdmin {
  private last: RolloutView | null = null;
  private readonly parsed = new Map<string, PolicySet>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failing = false;
  /** When the read of the snapshot in force was sent (monotonic ms). */
  private lastReadSent = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: ReplicatedDeps) {
    deps.target.setPolicyValidUntil(Number.NEGATIVE_INFINITY); // nothing known yet: fail closed
  }

  /** First read now, then every staleMs / 4. */
  start(): Promise<void> {
    const loop = async () => {
      await this.poll();
      if (!this.stopped) {
        this.timer = setTimeout(loop, Math.max(10, Math.floor(this.deps.staleMs / 4)));
        this.timer.unref();
      }
    };
    return loop();
  }

  /** One read; a failure leaves the last snapshot in force until it goes stale. */
  async poll(): Promise<RolloutView | null> {
    const sent = this.deps.now();
    let view: RolloutView | null;
    try {
      view = await this.deps.read();
    } catch (err) {
      if (!this.failing) this.deps.onEvent?.("policy_read_failed", { error: (err as Error).message });
      this.failing = true;
      return this.last;
    }
    this.failing = false;
    if (view === null) return this.last; // the daemon has not written one (yet, or Redis lost it)
    let sets: PolicySet[];
    try {
      sets = view.docs.map((d) => {
        const k = idOf(d);
        let set = this.parsed.get(k);
        if (set === undefined) {
          set = parsePolicies(d.policies, `policy ${k}`, this.deps.regionIds);
          this.parsed.set(k, set);
        }
        return set;
      });
    } catch (err) {
      // The daemon validated it against the same regions: a mismatch is a misconfiguration.
      this.deps.onEvent?.("policy_invalid", { error: (err as Error).message });
      return this.last;
    }
    if (sets.length === 0) return this.last;
    if (!sameId(this.last?.target, view.target) || !sameId(this.last?.completed, view.completed)) {
      this.deps.onEvent?.("policy_version", {
        target: idOf(view.target),
        completed: idOf(view.completed),
        phase: view.phase,
      });
      // Documents older than the completed version are never needed again.
      for (const k of [...this.parsed.keys()])
        if (!view.docs.some((d) => idOf(d) === k)) this.parsed.delete(k);
    }
    this.deps.target.setPolicies(sets);
    this.deps.target.setPolicyValidUntil(sent + this.deps.staleMs);
    this.lastReadSent = sent;
    this.last = view;
    return view;
  }

  state(): PolicyState {
    const v = this.last;
    const usable = v !== null && !this.staleAt(this.deps.now());
    return {
      region: this.deps.region,
      replicated: true,
      phase: usable && v !== null ? v.phase : "unknown",
      target: v?.target ?? null,
      completed: v?.completed ?? null,
      growAtUs: v?.growAtUs ?? null,
      policies: v?.docs.find((d) => sameId(d, v.target))?.policies ?? null,
      stamps: v?.docs.find((d) => sameId(d, v.target))?.stamps ?? null,
      regions: this.deps.regionIds.map((id) => ({ id, acked: v?.regions[id]?.acked ?? null })),
    };
  }

  private staleAt(now: number): boolean {
    return now > this.lastReadSent + this.deps.staleMs;
  }

  async propose(policies: unknown, options: { ifMatch?: string } = {}): Promise<ProposeResult> {
    validatePolicies(policies, this.deps.regionIds);
    const current = this.state();
    checkIfMatch(options.ifMatch, current.target);
    if (current.policies !== null && canonical(current.policies) === canonical(policies))
      return { unchanged: true, state: current };
    return this.send({ policies });
  }

  async proposeEntry(
    tenant: string,
    resource: string,
    spec: Record<string, unknown> | null,
  ): Promise<ProposeResult> {
    const current = this.state();
    if (current.policies === null || typeof current.policies !== "object") {
      throw new LimiterError(
        "GQ_ERR_POLICY_UNKNOWN",
        "this region does not know the current policies yet; retry, or PUT /v1/policy with a whole document",
      );
    }
    // Validated against the newest document here; the daemon applies the entry
    // to its own newest document (merged with concurrent edits of other entries).
    const next = withEntry(current.policies, tenant, resource, spec);
    validatePolicies(next, this.deps.regionIds);
    const list = ((current.policies as { policies?: Record<string, unknown>[] }).policies ?? []).find(
      (p) => p.tenant === tenant && p.resource === resource,
    );
    const same =
      spec === null
        ? list === undefined
        : list !== undefined && canonical(list) === canonical({ tenant, resource, ...spec });
    if (same) return { unchanged: true, state: current };
    return this.send({ entry: { tenant, resource, spec } });
  }

  private async send(
    what:
      | { policies: unknown }
      | { entry: { tenant: string; resource: string; spec: Record<string, unknown> | null } },
  ): Promise<ProposeResult> {
    const proposalId = randomUUID();
    await this.deps.push({ proposalId, ...what, at: Date.now() });
    const deadline = this.deps.now() + (this.deps.proposeWaitMs ?? 5000);
    let doc: VersionId | undefined;
    while (this.deps.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      const v = await this.poll();
      doc = v?.docs.find((d) => d.proposalId === proposalId);
      if (doc !== undefined) break;
    }
    return {
      unchanged: false,
      proposalId,
      ...(doc !== undefined
        ? { proposed: { version: doc.version, origin: doc.origin, digest: doc.digest } }
        : {}),
      state: this.state(),
    };
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

/** A policies document from a parsed set (when the caller has no file text, e.g. tests). */
export function documentOf(set: PolicySet | undefined): Record<string, unknown> | null {
  if (set === undefined) return null;
  const list = (l: AccessList) => [
    ...[...l.tenants].map((tenant) => ({ tenant })),
    ...[...l.keys].map((k) => ({ key: k.replace("|", "/") })),
    ...l.globs.map((g) => ({ key: `${g.tenant}/${g.resource}` })),
  ];
  // A window algorithm's refill is derived from capacity / windowMs: the file may not state it.
  const spec = (p: PolicySpec) => {
    if (p.windowMs === undefined) return { ...p };
    const { refillPerSecond: _derived, ...rest } = p;
    return rest;
  };
  return {
    default: spec(set.default),
    policies: [...set.entries].map(([k, p]) => ({ ...parseQuotaKey(k), ...spec(p) })),
    ...((set.overrides?.size ?? 0) > 0 || (set.wildcards?.length ?? 0) > 0
      ? {
          overrides: [
            ...[...(set.overrides?.values() ?? [])].map((o) => ({
              tenant: o.tenant,
              resource: o.resource,
              ...o.fields,
            })),
            // Wildcard overrides (key globs), most specific first (their order does not matter).
            ...(set.wildcards ?? []).map((w) => ({ key: w.key, ...w.fields })),
          ],
        }
      : {}),
    ...(set.allow !== undefined ? { allow: list(set.allow) } : {}),
    ...(set.deny !== undefined ? { deny: list(set.deny) } : {}),
  };
}

/**
 * Not replicated: the file, changed in this process only (version counted
 * locally). With several regions configured, every region's processes size
 * each key's slice from their own copy of the file (Σ b_i ≤ U needs them to
 * agree), so any change that moves a key's algorithm, capacity, rate, window,
 * base share or floor is refused here, naming the field (sizingChange).
 */
export class StaticPolicies implements PolicyAdmin {
  private version = 0;
  private set: PolicySet | undefined;
  constructor(
    private readonly region: string,
    private readonly regionIds: readonly string[],
    private policies: unknown,
    private readonly target: PolicyTarget,
  ) {}

  state(): PolicyState {
    const digest = docDigest({
      version: this.version,
      origin: this.region,
      proposedAtMs: 0,
      policies: this.policies,
    });
    const id = { version: this.version, origin: this.region, digest };
    return {
      region: this.region,
      replicated: false,
      phase: "stable",
      target: id,
      completed: id,
      growAtUs: null,
      policies: this.policies,
      stamps: null,
      regions: this.regionIds.map((r) => ({ id: r, acked: r === this.region ? id : null })),
    };
  }

  async proposeEntry(
    tenant: string,
    resource: string,
    spec: Record<string, unknown> | null,
  ): Promise<ProposeResult> {
    return this.propose(withEntry(this.policies, tenant, resource, spec));
  }

  async propose(policies: unknown, options: { ifMatch?: string } = {}): Promise<ProposeResult> {
    checkIfMatch(options.ifMatch, this.state().target);
    const set = validatePolicies(policies, this.regionIds);
    if (canonical(policies) === canonical(this.policies)) return { unchanged: true, state: this.state() };
    if (this.regionIds.length > 1) {
      this.set ??= validatePolicies(this.policies, this.regionIds);
      const change = sizingChange(this.set, set, this.regionIds);
      if (change !== undefined)
        throw new LimiterError("GQ_ERR_INVALID_POLICY", change.message, { field: change.field });
    }
    this.policies = policies;
    this.set = set;
    this.version++;
    this.target.setPolicies([set]);
    return { unchanged: false, state: this.state() };
  }

  stop(): void {}
}
