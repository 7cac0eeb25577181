// Writes the report pair: the HTML page and, beside it, the JSON with the same
// series plus every request (columns: sent and answered ms since the origin,
// region, key, outcome, cost), so the verdict can be re-derived offline; with
// a stream scenario also every admitted frame (read and delivered ms, region, bytes).
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { type ReportData, renderReportHtml } from "./report.js";
import type { RequestLog } from "./request-log.js";
import type { DemoKey } from "./types.js";

export function jsonPathFor(htmlPath: string): string {
  return htmlPath.endsWith(".html") ? `${htmlPath.slice(0, -5)}.json` : `${htmlPath}.json`;
}

export async function writeReport(
  path: string,
  data: ReportData,
  log: RequestLog,
  keys: readonly DemoKey[],
  regions: readonly string[],
  streamFrames?: ReadonlyArray<{ region: number; sentMs: number; answeredMs: number; bytes: number }>,
): Promise<{ htmlPath: string; jsonPath: string }> {
  const htmlPath = resolve(path);
  const jsonPath = jsonPathFor(htmlPath);
  await mkdir(dirname(htmlPath), { recursive: true });
  const rows: number[][] = [];
  for (const r of log.records()) rows.push([r.sentMs, r.answeredMs, r.region, r.key, r.outcome, r.cost]); // full precision: the oracle is exact
  const json = {
    ...data,
    keys,
    requests: {
      columns: ["sentMs", "answeredMs", "region", "key", "outcome", "cost"],
      regions,
      outcomes: { 1: "allowed", 2: "denied", 3: "error" },
      rows,
    },
    ...(streamFrames
      ? {
          streamFrames: {
            columns: ["readMs", "deliveredMs", "region", "bytes"],
            regions,
            rows: streamFrames.map((f) => [f.sentMs, f.answeredMs, f.region, f.bytes]),
          },
        }
      : {}),
  };
  await writeFile(htmlPath, renderReportHtml(data));
  await writeFile(jsonPath, `${JSON.stringify(json)}\n`);
  return { htmlPath, jsonPath };
}
