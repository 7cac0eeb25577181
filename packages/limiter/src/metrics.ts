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

/** The share gauge: takes a share in ppm (as decisions carry it), exports a ratio. */
export interface ShareGauge {
  set(labels: { readonly key_class: string; readonly resource: string }, sharePpm: number): void;
}

/** The per-key-class decision counter (resource mapped like the share gauge's). */
export interface KeyDecisionCounter {
  inc(labels: { readonly key_class: string; readonly resource: string; readonly result: string }): void;
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

/** Labels of the series a wrapper created, so that dead ones can be removed at scrape time. */
function prunable<L extends { key_class: string; resource: string }>(
  isLive: ((keyClass: string, resource: string) => boolean) | undefined,
) {
  const seen = new Map<string, L>();
  return {
    note(labels: L): void {
      if (isLive !== undefined) seen.set(Object.values(labels).join("\u0000"), labels);
    },
    prune(remove: (labels: L) => void): void {
      if (isLive === undefined) return;
      for (const [k, labels] of seen)
        if (!isLive(labels.key_class, labels.resource)) {
          remove(labels);
          seen.delete(k);
        }
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
  const shareSeries = prunable<{ key_class: string; resource: string }>(options.isLive);
  const share = new Gauge({
    name: "geoquota_share_ratio",
    help: "Share of the global limit (0..1) this region used for its last decision, by key class and configured resource",
    labelNames: ["key_class", "resource"] as const,
    registers,
    collect() {
      shareSeries.prune((l) => this.remove(l));
    },
  });
  const keySeries = prunable<{ key_class: string; resource: string; result: string }>(options.isLive);
  const keyDecisions = new Counter({
    name: "geoquota_key_decisions_total",
    help: "Check decisions by key class (tenant with an explicit policy, else default), configured resource (else other) and result (allowed|denied)",
    labelNames: ["key_class", "resource", "result"] as const,
    registers,
    collect() {
      keySeries.prune((l) => this.remove(l));
    },
  });
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
        const l = { key_class: labels.key_class, resource: resourceLabel(labels.resource) };
        shareSeries.note(l);
        share.set(l, sharePpm / SHARE_UNITS);
      },
    },
    leasedTokens: new Gauge({
      name: "geoquota_leased_keys",
      help: "Keys holding in-process leases",
      registers,
    }),
    keyDecisions: {
      inc(labels) {
        const l = {
          key_class: labels.key_class,
          resource: resourceLabel(labels.resource),
          result: labels.result,
        };
        keySeries.note(l);
        keyDecisions.inc(l);
      },
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
