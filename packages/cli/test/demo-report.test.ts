import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type ReportData, renderReportHtml } from "../src/demo/report.js";
import { jsonPathFor, writeReport } from "../src/demo/report-files.js";
import { OUTCOME, RequestLog } from "../src/demo/request-log.js";
import { cumulativeSeries, rateSeries } from "../src/demo/series.js";

const regions = ["us-east", "eu-west", "ap-south"];
const key = {
  tenant: "cust_ent_9942",
  resource: "payments_checkout",
  capacity: 1000,
  refillPerSecond: 1000 / 60,
};

/** A synthetic 30 s run: even demand, then us-east takes over; a partition from 20 s to 25 s. */
function syntheticLog(): RequestLog {
  const log = new RequestLog(20_000);
  for (let t = 0; t < 30_000; t += 50) {
    const region = t < 15_000 ? (t / 50) % 3 : 0;
    const allowed = t < 5000 || (t / 50) % 4 === 0;
    log.push({
      sentMs: t,
      answeredMs: t + 3,
      region,
      key: 0,
      outcome: allowed ? OUTCOME.allowed : OUTCOME.denied,
      cost: 1,
    });
  }
  return log;
}

function syntheticData(log: RequestLog): ReportData {
  const rates = rateSeries(log, 0, 3, 0, 30_000);
  const tMs = Array.from({ length: 60 }, (_, i) => i * 500);
  return {
    title: "geoquota demo",
    generatedAt: "2030-01-01T00:00:00.000Z",
    durationMs: 30_000,
    key,
    regions,
    scenarios: [
      { name: "steady", startMs: 0, endMs: 15_000 },
      { name: "partition", startMs: 15_000, endMs: 30_000 },
    ],
    faults: [{ kind: "partition", label: "us-east partitioned", startMs: 20_000, endMs: 25_000 }],
    shares: {
      tMs,
      perRegion: [
        tMs.map((t) => (t < 15_000 ? 333_334 : 960_000)),
        tMs.map((t) => (t < 15_000 ? 333_333 : 20_000)),
        tMs.map((t) => (t === 10_000 ? null : t < 15_000 ? 333_333 : 20_000)),
      ],
    },
    rates: {
      bucketMs: rates.bucketMs,
      tMs: rates.admittedPerSec[0]!.map((_, j) => j * 1000),
      admittedPerSec: rates.admittedPerSec,
      deniedPerSec: rates.deniedPerSec,
    },
    cumulative: cumulativeSeries(log, 0, key),
    lag: { tMs, perLink: { "us-east>eu-west": tMs.map((t) => (t >= 20_000 && t < 25_000 ? null : 300)) } },
    summary: ["global bound held: admitted 1234 ≤ bound 1500.00", "utilization during shift: 96.0%"],
    ok: true,
    stats: { "requests sent": 600 },
  };
}

describe("report HTML", () => {
  it("is one self-contained page: no network reference, no script, inline SVG charts", () => {
    const html = renderReportHtml(syntheticData(syntheticLog()));
    expect(html.startsWith("<!doctype html>")).toBe(true);
    expect(html.trimEnd().endsWith("</html>")).toBe(true);
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect(html.match(/<svg /g)).toHaveLength(4);
    expect(html.match(/<\/svg>/g)).toHaveLength(4);
    for (const r of regions) expect(html).toContain(r);
    expect(html).toContain("global bound held: admitted 1234 ≤ bound 1500.00");
    expect(html).toContain('class="band"'); // the partition is shaded
    expect(html).toContain("us-east partitioned");
    expect(html).toContain("Cumulative admitted");
    expect(html).toMatch(/<path d="M[\d.]+,[\d.]+/); // series are drawn
  });

  it("adds the stream chart (bytes/s per region, the byte-rate line) when the run streamed", () => {
    const d = syntheticData(syntheticLog());
    expect(renderReportHtml(d)).not.toContain("Streamed KiB/s");
    const tMs = Array.from({ length: 30 }, (_, i) => i * 1000);
    const html = renderReportHtml({
      ...d,
      stream: {
        tenant: "cust_ent_9942",
        resource: "stream_bytes",
        capacity: 262_144,
        refillPerSecond: 262_144,
        multiple: 10,
        bucketMs: 1000,
        tMs,
        bytesPerSec: regions.map(() => tMs.map((t) => (t >= 15_000 ? 87_381 : 0))),
      },
    });
    expect(html.match(/<svg /g)).toHaveLength(5);
    expect(html).toContain("Streamed KiB/s per region, cust_ent_9942/stream_bytes (dashed: its byte rate r)");
    const chart = html.slice(html.lastIndexOf("<svg "), html.lastIndexOf("</svg>"));
    for (const r of regions) expect(chart).toContain(`>${r}</text>`);
    expect(chart).toContain(">r (bytes)</text>");
    expect(chart).toMatch(/stroke-dasharray="6 4"/); // the rate line
    expect(html).not.toMatch(/https?:\/\//i);
  });

  it("zooms the stream chart into the stream scenario", () => {
    const d = syntheticData(syntheticLog());
    const tMs = Array.from({ length: 30 }, (_, i) => i * 1000);
    const html = renderReportHtml({
      ...d,
      scenarios: [...d.scenarios.slice(0, 1), { name: "stream", startMs: 20_000, endMs: 30_000 }],
      stream: {
        tenant: "cust_ent_9942",
        resource: "stream_bytes",
        capacity: 262_144,
        refillPerSecond: 262_144,
        multiple: 10,
        bucketMs: 1000,
        tMs,
        bytesPerSec: regions.map(() => tMs.map((t) => (t >= 20_000 ? 87_381 : 0))),
      },
    });
    const chart = html.slice(html.lastIndexOf("<svg "), html.lastIndexOf("</svg>"));
    const xLabels = [...chart.matchAll(/class="xl">(\d+)s</g)].map((m) => Number(m[1]));
    expect(xLabels[0]).toBeGreaterThanOrEqual(18); // the axis starts 2 s before the scenario
    expect(xLabels.at(-1)).toBe(30);
    expect(chart).toContain(">stream</text>"); // its marker
    expect(chart).not.toContain(">steady</text>"); // markers outside the window are left out
  });

  it("escapes text from the data", () => {
    const d = syntheticData(syntheticLog());
    const html = renderReportHtml({ ...d, summary: ["<b>&</b>"] });
    expect(html).toContain("&lt;b&gt;&amp;&lt;/b&gt;");
    expect(html).not.toContain("<b>&</b>");
  });

  it("marks a violated run", () => {
    const d = syntheticData(syntheticLog());
    const html = renderReportHtml({
      ...d,
      ok: false,
      summary: ["global bound VIOLATED: admitted 9 > bound 8.00"],
    });
    expect(html).toContain('class="verdict bad"');
  });
});

describe("report files", () => {
  let dir = "";
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("writes the HTML and, beside it, JSON with the series and every request", async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-demo-report-"));
    const log = syntheticLog();
    const path = join(dir, "nested", "demo.html");
    const files = await writeReport(path, syntheticData(log), log, [key], regions);
    expect(files.jsonPath).toBe(join(dir, "nested", "demo.json"));
    expect(readFileSync(files.htmlPath, "utf8")).toContain("<svg ");
    const json = JSON.parse(readFileSync(files.jsonPath, "utf8"));
    expect(json.requests.rows).toHaveLength(log.size);
    expect(json.requests.columns).toEqual(["sentMs", "answeredMs", "region", "key", "outcome", "cost"]);
    expect(json.cumulative.tMs.length).toBe(json.cumulative.bound.length);
    expect(json.shares.perRegion).toHaveLength(3);
    expect(jsonPathFor("x/report")).toBe("x/report.json");
    expect(json.streamFrames).toBeUndefined();
    const frames = [{ region: 1, sentMs: 10.5, answeredMs: 12.25, bytes: 4096 }];
    await writeReport(path, syntheticData(log), log, [key], regions, frames);
    const withStream = JSON.parse(readFileSync(files.jsonPath, "utf8"));
    expect(withStream.streamFrames.columns).toEqual(["readMs", "deliveredMs", "region", "bytes"]);
    expect(withStream.streamFrames.rows).toEqual([[10.5, 12.25, 1, 4096]]);
  });
});

describe("series", () => {
  it("cumulative admitted ends at the total and never loses an admission to thinning", () => {
    const log = syntheticLog();
    const c = cumulativeSeries(log, 0, key, 250);
    let total = 0;
    for (const r of log.records()) if (r.outcome === OUTCOME.allowed) total += 1;
    expect(c.admitted.at(-1)).toBe(total);
    expect(c.bound[0]).toBe(1000);
    for (let i = 1; i < c.admitted.length; i++)
      expect(c.admitted[i]!).toBeGreaterThanOrEqual(c.admitted[i - 1]!);
  });

  it("rates per region per second add up to the admissions", () => {
    const log = syntheticLog();
    const r = rateSeries(log, 0, 3, 0, 30_000);
    const sum = r.admittedPerSec.flat().reduce((a, b) => a + b, 0);
    let total = 0;
    for (const x of log.records()) if (x.outcome === OUTCOME.allowed) total += 1;
    expect(sum).toBe(total);
  });
});
