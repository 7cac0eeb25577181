// Prometheus metrics of one limiter process. Label values are bounded: result
// and source are enums; key class is the policy's tenant (explicit policies
// only, else "default") and resource is a resource named by a configured
// policy (else "other"), so request bodies never create series. Series of a
// key class or resource no policy names any more are dropped at the next
// scrape (`isLive`), so the count stays bounded by the current config.
import { type PolicySet, quotaKey } from "@geoquota/config";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BreakerState } from "./breaker.js";
import { SHARE_UNITS } from "@geoquota/core";

/** The `resource` label of anything no configured policy names. */
export const OTHER_RESOURCE = "other";

/**
 * One series of the share gauge: the share (ppm) of the latest decision of its key class and
 * resource, written by a check as a plain number and exported at the next scrape (issue 24
 * point 3: no prom-client label hashing on the check path).
 */
export interface ShareCell {
  sharePpm: number;
  /** False once a scrape dropped the series (no policy names it): a holder looks it up again. */
  live: boolean;
}

/** The per-key-class decisions of one (key class, resource) counted since the last scrape. */
export interface DecisionCell {
  allowed: number;
  denied: number;
  /** As ShareCell.live. */
  live: boolean;
}

/** The share gauge: takes a share in ppm (as decisions carry it), exports a ratio. */
export interface ShareGauge {
  set(labels: { readonly key_class: string; readonly resource: string }, sharePpm: number): void;
  /** The series of a key class and resource (mapped to its label), for a caller that keeps it. */
  cell(keyClass: string, resource: string): ShareCell;
}

/** The per-key-class decision counter (resource mapped like the share gauge's). */
export interface KeyDecisionCounter {
  inc(labels: { readonly key_class: string; readonly resource: string; readonly result: string }): void;
  /** As ShareGauge.cell. */
  cell(keyClass: string, resource: string): DecisionCell;
}

export interface LimiterMetrics {
  readonly decisions: Counter<"result" | "source">;
  /** Decisions under a shadow policy: result allowed|would_deny (never denied), by source. */
  readonly shadowDecisions: Counter<"result" | "source">;
  readonly latency: Histogram<"source">;
  readonly storeErrors: Counter<"op" | "kind">;
  readonly breakerState: Gauge;
  readonly share: ShareGauge;
  readonly leasedTokens: Gauge;
  /** Decisions by key class (bounded by the configured policies), resource and result. */
  readonly keyDecisions: KeyDecisionCounter;
}

export interface MetricsOptions {
  /**
   * Maps a resource to its label value. main/app pass "the resource if a
   * configured policy names it, else `other`"; the default maps everything
   * to `other` (never the raw value).
   */
  readonly resourceLabel?: (resource: string) => string;
  /**
   * Whether a (key class, resource label) pair is still named by the
   * policies: others are removed at scrape time. Default: keep everything.
   */
  readonly isLive?: (keyClass: string, resource: string) => boolean;
  /** The breaker's state, read at each scrape (open turns half-open by time alone, with no event). */
  readonly breakerState?: () => BreakerState;
  /** Keys holding in-process leases, read at each scrape. */
  readonly leasedKeys?: () => number;
}

const resourcesOf = new WeakMap<PolicySet, ReadonlySet<string>>();

/** Resources named by a configured policy (the only values the `resource` metric label takes). */
function configuredResources(p: PolicySet): ReadonlySet<string> {
  let set = resourcesOf.get(p);
  if (set === undefined) {
    set = new Set([...p.entries.keys()].map((k) => k.slice(k.indexOf("|") + 1)));
    resourcesOf.set(p, set);
  }
  return set;
}

/**
 * Labels bounded by the policies `newest` returns (read at each call: a policy change
 * moves them): a resource is its name when a policy names it, else `other`; a removed
 * policy's series go at the next scrape.
 */
export function policyLabels(
  newest: () => PolicySet | undefined,
): Required<Pick<MetricsOptions, "resourceLabel" | "isLive">> {
  return {
    // The newest set without throwing: a check denied before the first set
    // (policy_unknown) is counted too.
    resourceLabel: (r) => {
      const p = newest();
      return p !== undefined && configuredResources(p).has(r) ? r : OTHER_RESOURCE;
    },
    isLive: (keyClass, resource) => {
      const p = newest();
      if (p === undefined) return true;
      if (resource === OTHER_RESOURCE) return keyClass === "default";
      if (!configuredResources(p).has(resource)) return false;
      return keyClass === "default" || p.entries.has(quotaKey(keyClass, resource));
    },
  };
}

/**
 * The cells of one labelled metric by (key class, resource label): created on first use,
 * read at scrape time, and dropped there once `isLive` says no policy names them (their
 * holders see `live` false and look them up again).
 */
function cells<C extends { live: boolean }>(
  isLive: ((keyClass: string, resource: string) => boolean) | undefined,
  make: () => C,
) {
  const all = new Map<
    string,
    { readonly labels: { key_class: string; resource: string }; readonly cell: C }
  >();
  return {
    get(keyClass: string, resource: string): C {
      const k = `${keyClass}\u0000${resource}`;
      let e = all.get(k);
      if (e === undefined) {
        e = { labels: { key_class: keyClass, resource }, cell: make() };
        all.set(k, e);
      }
      return e.cell;
    },
    prune(remove: (labels: { key_class: string; resource: string }) => void): void {
      if (isLive === undefined) return;
      for (const [k, e] of all)
        if (!isLive(e.labels.key_class, e.labels.resource)) {
          remove(e.labels);
          e.cell.live = false;
          all.delete(k);
        }
    },
    entries(): IterableIterator<{
      readonly labels: { key_class: string; resource: string };
      readonly cell: C;
    }> {
      return all.values();
    },
  };
}

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

export function breakerStateValue(s: BreakerState): number {
  return BREAKER_VALUE[s];
}

export function createMetrics(registry: Registry, options: MetricsOptions = {}): LimiterMetrics {
  const registers = [registry];
  const resourceLabel = options.resourceLabel ?? (() => OTHER_RESOURCE);
  const breakerState = options.breakerState;
  const shareCells = cells<ShareCell>(options.isLive, () => ({ sharePpm: Number.NaN, live: true }));
  // Registered in `registry`; a scrape reads the cells the checks wrote.
  new Gauge({
    name: "geoquota_share_ratio",
    help: "Share of the global limit (0..1) this region used for its last decision, by key class and configured resource",
    labelNames: ["key_class", "resource"] as const,
    registers,
    collect() {
      shareCells.prune((l) => this.remove(l));
      for (const { labels, cell } of shareCells.entries())
        if (!Number.isNaN(cell.sharePpm)) this.set(labels, cell.sharePpm / SHARE_UNITS);
    },
  });
  const decisionCells = cells<DecisionCell>(options.isLive, () => ({ allowed: 0, denied: 0, live: true }));
  new Counter({
    name: "geoquota_key_decisions_total",
    help: "Check decisions by key class (tenant with an explicit policy, else default), configured resource (else other) and result (allowed|denied)",
    labelNames: ["key_class", "resource", "result"] as const,
    registers,
    collect() {
      decisionCells.prune((l) => {
        this.remove({ ...l, result: "allowed" });
        this.remove({ ...l, result: "denied" });
      });
      // What the checks counted since the last scrape goes into the counter now.
      for (const { labels, cell } of decisionCells.entries()) {
        if (cell.allowed > 0) this.inc({ ...labels, result: "allowed" }, cell.allowed);
        if (cell.denied > 0) this.inc({ ...labels, result: "denied" }, cell.denied);
        cell.allowed = 0;
        cell.denied = 0;
      }
    },
  });
  const leasedKeys = options.leasedKeys;
  return {
    decisions: new Counter({
      name: "geoquota_decisions_total",
      help: "Check decisions by result (allowed|denied) and source (store|lease|fail_open|unavailable|allow_list|deny_list|policy_unknown)",
      labelNames: ["result", "source"] as const,
      registers,
    }),
    shadowDecisions: new Counter({
      name: "geoquota_shadow_decisions_total",
      help: "Decisions under a shadow policy (also in geoquota_decisions_total, as allowed) by result (allowed|would_deny) and source",
      labelNames: ["result", "source"] as const,
      registers,
    }),
    latency: new Histogram({
      name: "geoquota_check_duration_seconds",
      help: "Time to decide one check, by source",
      labelNames: ["source"] as const,
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers,
    }),
    storeErrors: new Counter({
      name: "geoquota_redis_errors_total",
      help: "Failed store (Redis) calls by operation and kind (timeout|error|breaker_open)",
      labelNames: ["op", "kind"] as const,
      registers,
    }),
    breakerState: new Gauge({
      name: "geoquota_breaker_state",
      help: "Circuit breaker around the store: 0 closed, 1 half-open, 2 open",
      registers,
      collect() {
        if (breakerState !== undefined) this.set(breakerStateValue(breakerState()));
      },
    }),
    share: {
      set(labels, sharePpm) {
        shareCells.get(labels.key_class, resourceLabel(labels.resource)).sharePpm = sharePpm;
      },
      cell: (keyClass, resource) => shareCells.get(keyClass, resourceLabel(resource)),
    },
    leasedTokens: new Gauge({
      name: "geoquota_leased_keys",
      help: "Keys holding in-process leases",
      registers,
      collect() {
        if (leasedKeys !== undefined) this.set(leasedKeys());
      },
    }),
    keyDecisions: {
      inc(labels) {
        const cell = decisionCells.get(labels.key_class, resourceLabel(labels.resource));
        if (labels.result === "allowed") cell.allowed++;
        else cell.denied++;
      },
      cell: (keyClass, resource) => decisionCells.get(keyClass, resourceLabel(resource)),
    },
  };
}

/**
 * Redis setup drift (DESIGN §4 "Checked continuously"): a setting the start
 * check verified that changed while the process runs. `setting` is one of a
 * fixed few (`maxmemory-policy`, `replicas`), so the series are bounded. The
 * daemon exports the same two names (gossip daemon/metrics.ts).
 */
export interface SetupDriftMetrics {
  /** 1 while the setting is unsafe on some master (admissions refused), else 0. */
  readonly drifting: Gauge<"setting">;
  /** Times the setting became unsafe. */
  readonly changes: Counter<"setting">;
}

export function createSetupDriftMetrics(registry: Registry, settings: readonly string[]): SetupDriftMetrics {
  const registers = [registry];
  const m: SetupDriftMetrics = {
    drifting: new Gauge({
      name: "geoquota_redis_setup_drift",
      help: "1 while a Redis setting checked at start is unsafe again (admissions refused), by setting",
      labelNames: ["setting"] as const,
      registers,
    }),
    changes: new Counter({
      name: "geoquota_redis_setup_drift_changes_total",
      help: "Times a Redis setting checked at start became unsafe while running, by setting",
      labelNames: ["setting"] as const,
      registers,
    }),
  };
  // Every series exists from the start (0): an alert can tell "never drifted" from "not exported".
  for (const setting of settings) {
    m.drifting.set({ setting }, 0);
    m.changes.inc({ setting }, 0);
  }
  return m;
}
