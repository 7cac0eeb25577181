// A geoquota process's own metrics (the limiter's and the daemon's /metrics):
// prom-client's defaults, made to pass promtool.
import { collectDefaultMetrics, type Registry } from "prom-client";

/**
 * prom-client's default process metrics, less the three `nodejs_active_*_total`
 * gauges: a gauge named `_total` fails `promtool check metrics`, and each is the
 * sum of the by-type gauge beside it (`nodejs_active_handles{type}`, …).
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of [
    "nodejs_active_handles_total",
    "nodejs_active_requests_total",
    "nodejs_active_resources_total",
  ])
    registry.removeSingleMetric(name);
}
