// A process's own metrics (src/process-metrics.ts): prom-client's defaults registered on the
// given registry, without the three `nodejs_active_*_total` gauges that fail promtool, while the
// by-type gauges beside them stay.
import { Registry, register } from "prom-client";
import { expect, it } from "vitest";
import { collectProcessMetrics } from "../src/index.js";

it("registers the process metrics on the registry given, no gauge named _total", async () => {
  const registry = new Registry();
  collectProcessMetrics(registry);
  const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
  for (const name of [
    "process_cpu_user_seconds_total",
    "process_start_time_seconds",
    "nodejs_heap_size_used_bytes",
  ])
    expect(names).toContain(name);
  expect(names).toContain("nodejs_active_handles");
  const totalGauges = (await registry.getMetricsAsJSON())
    .filter((m) => String(m.type) === "gauge" && m.name.endsWith("_total"))
    .map((m) => m.name);
  expect(totalGauges).toEqual([]);
  // Only there: prom-client's global registry (another process's /metrics in a shared runtime) is left alone.
  expect(register.getSingleMetric("process_start_time_seconds")).toBeUndefined();
});
