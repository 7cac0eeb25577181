// The demo's report: one self-contained HTML page (inline SVG and CSS, no
// script, no network) and, beside it, a JSON file with the same series plus
// every request, so anyone can re-run the oracle on the raw records.
import { type ChartBand, type ChartMarker, escapeXml, lineChart } from "./svg-chart.js";
import type { FaultWindow, ScenarioWindow } from "./types.js";

export interface ReportData {
  readonly title: string;
  readonly generatedAt: string;
  readonly durationMs: number;
  readonly key: {
    readonly tenant: string;
    readonly resource: string;
    readonly capacity: number;
    readonly refillPerSecond: number;
  };
  readonly regions: readonly string[];
  readonly scenarios: readonly ScenarioWindow[];
  readonly faults: readonly FaultWindow[];
  /** Polled shares, ppm, per region (null: region did not answer). Times in ms since the origin. */
  readonly shares: {
    readonly tMs: readonly number[];
    readonly perRegion: ReadonlyArray<ReadonlyArray<number | null>>;
  };
  /** Admitted/denied per second per region, by bucket start time. */
  readonly rates: {
    readonly bucketMs: number;
    readonly tMs: readonly number[];
    readonly admittedPerSec: ReadonlyArray<readonly number[]>;
    readonly deniedPerSec: ReadonlyArray<readonly number[]>;
  };
  readonly cumulative: {
    readonly tMs: readonly number[];
    readonly admitted: readonly number[];
    readonly bound: readonly number[];
  };
  /** Gossip lag per link `a>b`, ms. */
  readonly lag: {
    readonly tMs: readonly number[];
    readonly perLink: Readonly<Record<string, ReadonlyArray<number | null>>>;
  };
  /** The stream scenario's tenant, when the run had one: streamed bytes/s per region per bucket. */
  readonly stream?: {
    readonly tenant: string;
    readonly resource: string;
    readonly capacity: number;
    /** The tenant's byte rate r, bytes/s. */
    readonly refillPerSecond: number;
    readonly multiple: number;
    readonly bucketMs: number;
    readonly tMs: readonly number[];
    /** [region][bucket] bytes/s delivered by the region's stream server. */
    readonly bytesPerSec: ReadonlyArray<readonly number[]>;
  };
  /** The summary lines as printed at the end of the run. */
  readonly summary: readonly string[];
  readonly ok: boolean;
  readonly stats: Readonly<Record<string, number>>;
}

export const REGION_COLORS = [
  "#1f77b4",
  "#d62728",
  "#2ca02c",
  "#9467bd",
  "#ff7f0e",
  "#8c564b",
  "#e377c2",
  "#17becf",
];

function color(i: number): string {
  return REGION_COLORS[i % REGION_COLORS.length]!;
}

function bands(d: ReportData): ChartBand[] {
  return d.faults.map((f) => ({ fromX: f.startMs, toX: f.endMs, label: f.label }));
}

function markers(d: ReportData): ChartMarker[] {
  return d.scenarios.map((s) => ({ x: s.startMs, label: s.name }));
}

function maxOf(values: Iterable<number | null>, floor: number): number {
  let m = floor;
  for (const v of values) if (v !== null && v > m) m = v;
  return m;
}

function renderStreamChart(
  d: ReportData,
  st: NonNullable<ReportData["stream"]>,
  common: { xMax: number; bands: ChartBand[]; markers: ChartMarker[] },
  xMax: number,
): string {
  const kib = (b: number) => b / 1024;
  const mid = st.bucketMs / 2;
  const total = st.tMs.map((_, j) => d.regions.reduce((s, _id, i) => s + (st.bytesPerSec[i]?.[j] ?? 0), 0));
  const r = kib(st.refillPerSecond);
  const yMax = Math.max(r * 1.25, maxOf(total.map(kib), 0)) * 1.05;
  // Zoomed into the stream scenario (from 2 s before it), where the bytes flow.
  const window = d.scenarios.find((s) => s.name === "stream");
  const xMin = window ? Math.max(0, window.startMs - 2000) : 0;
  return lineChart({
    ...common,
    xMin,
    title: `Streamed KiB/s per region, ${st.tenant}/${st.resource} (dashed: its byte rate r)`,
    yMax,
    yLabel: (y) => `${Math.round(y)}`,
    series: [
      ...d.regions.map((id, i) => ({
        name: id,
        color: color(i),
        points: st.tMs.map((t, j) => [t + mid, kib(st.bytesPerSec[i]?.[j] ?? 0)] as const),
      })),
      {
        name: "all regions",
        color: "#333",
        points: st.tMs.map((t, j) => [t + mid, kib(total[j] ?? 0)] as const),
      },
      { name: "r (bytes)", color: "#888", dashed: true, points: [[xMin, r] as const, [xMax, r] as const] },
    ],
  });
}

export function renderReportHtml(d: ReportData): string {
  const xMax = Math.max(d.durationMs, ...d.cumulative.tMs, 1);
  const common = { xMax, bands: bands(d), markers: markers(d) };
  const shareChart = lineChart({
    ...common,
    title: `Share per region (% of ${d.key.tenant}/${d.key.resource}'s global limit)`,
    yMax: 100,
    yLabel: (y) => `${y}%`,
    series: d.regions.map((id, i) => ({
      name: id,
      color: color(i),
      points: d.shares.tMs.map((t, j) => {
        const v = d.shares.perRegion[i]?.[j];
        return [t, v === null || v === undefined ? null : v / 10_000] as const;
      }),
    })),
  });
  const rateMax = maxOf(d.rates.admittedPerSec.flat(), d.key.refillPerSecond * 1.25);
  const mid = d.rates.bucketMs / 2;
  const total = d.rates.tMs.map((_, j) =>
    d.regions.reduce((s, _id, i) => s + (d.rates.admittedPerSec[i]?.[j] ?? 0), 0),
  );
  const rateChart = lineChart({
    ...common,
    title: "Admitted per second, per region (dashed: the global rate r)",
    yMax: Math.max(rateMax, maxOf(total, 0)) * 1.05,
    yLabel: (y) => `${Math.round(y)}/s`,
    series: [
      ...d.regions.map((id, i) => ({
        name: id,
        color: color(i),
        points: d.rates.tMs.map((t, j) => [t + mid, d.rates.admittedPerSec[i]?.[j] ?? 0] as const),
      })),
      {
        name: "all regions",
        color: "#333",
        points: d.rates.tMs.map((t, j) => [t + mid, total[j] ?? 0] as const),
      },
      {
        name: "r",
        color: "#888",
        dashed: true,
        points: [[0, d.key.refillPerSecond] as const, [xMax, d.key.refillPerSecond] as const],
      },
    ],
  });
  const cumMax = maxOf([...d.cumulative.bound, ...d.cumulative.admitted], d.key.capacity);
  const cumChart = lineChart({
    ...common,
    title: "Cumulative admitted (all regions) against the bound C + r·T",
    yMax: cumMax * 1.05,
    yLabel: (y) => String(Math.round(y)),
    series: [
      {
        name: "admitted",
        color: "#2ca02c",
        step: true,
        points: d.cumulative.tMs.map((t, j) => [t, d.cumulative.admitted[j] ?? 0] as const),
      },
      {
        name: "bound",
        color: "#d62728",
        dashed: true,
        points: d.cumulative.tMs.map((t, j) => [t, d.cumulative.bound[j] ?? 0] as const),
      },
    ],
  });
  const links = Object.keys(d.lag.perLink);
  const lagMax = maxOf(
    links.flatMap((l) => d.lag.perLink[l] ?? []),
    1000,
  );
  const lagChart = lineChart({
    ...common,
    height: 220,
    title: "Gossip lag per link (ms; gaps: link down or unknown)",
    yMax: Math.min(lagMax, 30_000) * 1.05,
    yLabel: (y) => `${Math.round(y)}`,
    series: links.map((l, i) => ({
      name: l.replace(">", "→"),
      color: color(i),
      points: d.lag.tMs.map((t, j) => [t, d.lag.perLink[l]?.[j] ?? null] as const),
    })),
  });
  const streamChart = d.stream ? renderStreamChart(d, d.stream, common, xMax) : "";
  const statRows = Object.entries(d.stats)
    .map(([k, v]) => `<tr><td>${escapeXml(k)}</td><td>${escapeXml(String(v))}</td></tr>`)
    .join("");
  const scenarioRows = d.scenarios
    .map(
      (s) =>
        `<tr><td>${escapeXml(s.name)}</td><td>${(s.startMs / 1000).toFixed(1)}s</td><td>${(s.endMs / 1000).toFixed(1)}s</td></tr>`,
    )
    .join("");
  const faultRows = d.faults
    .map(
      (f) =>
        `<tr><td>${escapeXml(f.label)}</td><td>${(f.startMs / 1000).toFixed(1)}s</td><td>${(f.endMs / 1000).toFixed(1)}s</td></tr>`,
    )
    .join("");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeXml(d.title)}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 960px; color: #222; padding: 0 12px; }
h1 { font-size: 22px; margin: 0 0 4px; }
.sub { color: #666; margin-bottom: 16px; }
.verdict { padding: 10px 14px; border-radius: 6px; font-family: ui-monospace, monospace; white-space: pre-wrap; margin: 12px 0 20px; }
.ok { background: #e9f7ec; border: 1px solid #7cc48b; }
.bad { background: #fdecea; border: 1px solid #e0776b; }
svg { display: block; margin: 8px 0 18px; max-width: 100%; height: auto; }
svg .ct { font-size: 14px; font-weight: 600; fill: #222; }
svg .yl { font-size: 11px; fill: #555; text-anchor: end; }
svg .xl { font-size: 11px; fill: #555; text-anchor: middle; }
svg .lg { font-size: 12px; fill: #222; }
svg .grid { stroke: #eee; }
svg .frame { fill: none; stroke: #bbb; }
svg .band { fill: #f4a261; fill-opacity: 0.22; }
svg .bl { font-size: 10px; fill: #a0522d; }
svg .mk { stroke: #999; stroke-dasharray: 2 3; }
svg .ml { font-size: 11px; fill: #555; }
table { border-collapse: collapse; margin: 6px 0 18px; }
td, th { border: 1px solid #ddd; padding: 3px 10px; text-align: left; }
</style>
</head>
<body>
<h1>${escapeXml(d.title)}</h1>
<div class="sub">${escapeXml(d.key.tenant)} / ${escapeXml(d.key.resource)}: C = ${d.key.capacity}, r = ${d.key.refillPerSecond.toFixed(3)}/s · regions ${escapeXml(d.regions.join(", "))} · ${(d.durationMs / 1000).toFixed(0)} s · ${escapeXml(d.generatedAt)}</div>
<div class="verdict ${d.ok ? "ok" : "bad"}">${escapeXml(d.summary.join("\n"))}</div>
${shareChart}
${rateChart}
${cumChart}
${lagChart}
${streamChart}
<h2>Scenarios</h2>
<table><tr><th>scenario</th><th>from</th><th>to</th></tr>${scenarioRows}</table>
<h2>Faults (shaded above)</h2>
<table><tr><th>fault</th><th>from</th><th>to</th></tr>${faultRows || "<tr><td colspan=3>none</td></tr>"}</table>
<h2>Counts</h2>
<table>${statRows}</table>
<p class="sub">The verdict is computed from this client's own records (sent and answered times of every request) by the exact oracle of DESIGN §8: the whole run and every sub-interval [t0, t1] must satisfy admitted ≤ C + r·(t1 − t0), with no tolerance. The raw series and every request are in the JSON file beside this page.</p>
</body>
</html>
`;
}
