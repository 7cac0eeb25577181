// A minimal inline SVG line chart (pure string building) for the self-contained
// report: no script, no external reference (inline SVG in HTML needs no xmlns
// URL either), so the file opens anywhere,
// offline, and prints.

export interface ChartSeries {
  readonly name: string;
  readonly color: string;
  /** [x, y]; a null y breaks the line (no sample). */
  readonly points: ReadonlyArray<readonly [number, number | null]>;
  readonly dashed?: boolean;
  /** Draw as steps (value holds until the next point), e.g. cumulative counts. */
  readonly step?: boolean;
}

export interface ChartBand {
  readonly fromX: number;
  readonly toX: number;
  readonly label: string;
}

export interface ChartMarker {
  readonly x: number;
  readonly label: string;
}

export interface ChartOptions {
  readonly title: string;
  /** Left end of the x axis (default 0): a chart may zoom into a window of the run. */
  readonly xMin?: number;
  readonly xMax: number;
  readonly yMax: number;
  readonly yLabel: (y: number) => string;
  readonly xLabel?: (x: number) => string;
  readonly series: readonly ChartSeries[];
  readonly bands?: readonly ChartBand[];
  readonly markers?: readonly ChartMarker[];
  readonly width?: number;
  readonly height?: number;
}

export function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function niceStep(range: number, ticks: number): number {
  const raw = range / Math.max(1, ticks);
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

const n1 = (v: number) => (Math.round(v * 10) / 10).toString();

export function lineChart(o: ChartOptions): string {
  const W = o.width ?? 900;
  const H = o.height ?? 260;
  const L = 64;
  const R = 160; // room for the legend
  const T = 34;
  const B = 30;
  const pw = W - L - R;
  const ph = H - T - B;
  const xMin = Math.max(0, o.xMin ?? 0);
  const xMax = o.xMax > xMin ? o.xMax : xMin + 1;
  const yMax = o.yMax > 0 ? o.yMax : 1;
  const sx = (x: number) => L + ((Math.max(xMin, Math.min(xMax, x)) - xMin) / (xMax - xMin)) * pw;
  const sy = (y: number) => T + ph - (Math.max(0, Math.min(yMax, y)) / yMax) * ph;
  const xl = o.xLabel ?? ((x: number) => `${Math.round(x / 1000)}s`);
  const parts: string[] = [];
  parts.push(
    `<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeXml(o.title)}">`,
  );
  parts.push(`<text x="${L}" y="18" class="ct">${escapeXml(o.title)}</text>`);
  for (const b of (o.bands ?? []).filter((x) => x.toX > xMin && x.fromX < xMax)) {
    const x0 = sx(b.fromX);
    const x1 = Math.max(x0 + 1, sx(b.toX));
    parts.push(
      `<rect x="${n1(x0)}" y="${T}" width="${n1(x1 - x0)}" height="${ph}" class="band"><title>${escapeXml(b.label)}</title></rect>`,
    );
    // Label at the band's foot, cut to the room left in the plot (never over the legend).
    const room = Math.floor((L + pw - x0 - 4) / 5.6);
    const label = b.label.length <= room ? b.label : room > 1 ? `${b.label.slice(0, room - 1)}…` : "";
    if (label) parts.push(`<text x="${n1(x0 + 3)}" y="${T + ph - 5}" class="bl">${escapeXml(label)}</text>`);
  }
  const yStep = niceStep(yMax, 5);
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    parts.push(`<line x1="${L}" x2="${L + pw}" y1="${n1(sy(y))}" y2="${n1(sy(y))}" class="grid"/>`);
    parts.push(`<text x="${L - 6}" y="${n1(sy(y) + 4)}" class="yl">${escapeXml(o.yLabel(y))}</text>`);
  }
  const xStep = niceStep(xMax - xMin, 10);
  for (let x = Math.ceil(xMin / xStep) * xStep; x <= xMax + 1e-9; x += xStep)
    parts.push(`<text x="${n1(sx(x))}" y="${H - 10}" class="xl">${escapeXml(xl(x))}</text>`);
  for (const m of (o.markers ?? []).filter((x) => x.x >= xMin && x.x <= xMax)) {
    parts.push(`<line x1="${n1(sx(m.x))}" x2="${n1(sx(m.x))}" y1="${T - 4}" y2="${T + ph}" class="mk"/>`);
    parts.push(`<text x="${n1(sx(m.x) + 3)}" y="${T - 6}" class="ml">${escapeXml(m.label)}</text>`);
  }
  parts.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" class="frame"/>`);
  for (const s of o.series) {
    const segs: string[] = [];
    let cur = "";
    let prevY: number | null = null;
    for (const [x, y] of s.points) {
      if (x < xMin) continue;
      if (y === null) {
        if (cur) segs.push(cur);
        cur = "";
        prevY = null;
        continue;
      }
      if (!cur) cur = `M${n1(sx(x))},${n1(sy(y))}`;
      else if (s.step && prevY !== null) cur += `H${n1(sx(x))}V${n1(sy(y))}`;
      else cur += `L${n1(sx(x))},${n1(sy(y))}`;
      prevY = y;
    }
    if (cur) segs.push(cur);
    const dash = s.dashed ? ` stroke-dasharray="6 4"` : "";
    for (const d of segs)
      parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.8"${dash}/>`);
  }
  o.series.forEach((s, i) => {
    const y = T + 10 + i * 18;
    const dash = s.dashed ? ` stroke-dasharray="6 4"` : "";
    parts.push(
      `<line x1="${L + pw + 12}" x2="${L + pw + 32}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="2.5"${dash}/>`,
    );
    parts.push(`<text x="${L + pw + 36}" y="${y + 4}" class="lg">${escapeXml(s.name)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n");
}
