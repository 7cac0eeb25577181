// Renders the results as one Markdown table (what the CLI prints and the
// README keeps), each row with its target and whether it was met.
import type { Row } from "./types.js";

export function renderTable(rows: readonly Row[]): string {
  const head = ["section", "metric", "value", "target", "met"];
  const cells = rows.map((r) => [
    r.section,
    r.metric,
    r.value,
    r.target,
    r.met === undefined ? "" : r.met ? "yes" : "NO",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...cells.map(line)].join("\n");
}

export const fmt = {
  int: (x: number) => Math.round(x).toLocaleString("en-US"),
  ratio: (x: number) => `${x.toFixed(2)}×`,
  us: (x: number) => (x >= 1000 ? `${(x / 1000).toFixed(2)} ms` : `${x.toFixed(1)} µs`),
  ms: (x: number) => `${x.toFixed(2)} ms`,
  num: (x: number, d = 1) => x.toFixed(d),
};
