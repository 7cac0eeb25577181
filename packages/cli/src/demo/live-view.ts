// The live terminal view (pure: state in, string out). The TTY frame is
// redrawn in place about twice a second; without a TTY one plain line per
// second goes to the log instead. Width is fixed at 80 columns so the frame
// never wraps in a default terminal.

export interface LiveRegion {
  readonly id: string;
  readonly sharePpm: number | null;
  readonly recovering: boolean;
  readonly admittedPerSec: number;
  readonly deniedPerSec: number;
  readonly errorsPerSec: number;
}

export interface LiveLink {
  readonly from: string;
  readonly to: string;
  readonly up: boolean;
  readonly lagMs: number | null;
}

export interface LiveStreamRegion {
  readonly id: string;
  /** Bytes/s delivered by the region's stream server over the last second. */
  readonly bytesPerSec: number;
  readonly paused: number;
  readonly connections: number;
  /** What the region's flood client holds back (its writes stalled), bytes. */
  readonly clientBufferedBytes: number;
  /** The region's share of the stream key (its slice of r), ppm; null when unknown. */
  readonly sharePpm: number | null;
}

/** The stream tenant's part of the view (present when the run has a stream scenario). */
export interface LiveStream {
  /** `tenant/stream_bytes` */
  readonly key: string;
  /** The tenant's byte rate r, bytes/s. */
  readonly refillPerSecond: number;
  /** Each client's offered rate, as a multiple of r. */
  readonly multiple: number;
  readonly active: boolean;
  readonly regions: readonly LiveStreamRegion[];
}

export interface LiveState {
  readonly elapsedMs: number;
  readonly durationMs: number;
  readonly scenario: string;
  readonly scenarioDescription: string;
  /** The fault in effect, or null. */
  readonly fault: string | null;
  readonly key: string;
  readonly refillPerSecond: number;
  readonly regions: readonly LiveRegion[];
  readonly admitted: number;
  readonly bound: number;
  readonly links: readonly LiveLink[];
  readonly sent: number;
  readonly shed: number;
  readonly stream?: LiveStream;
}

const ESC = "\x1b[";
const style = {
  bold: (s: string, on: boolean) => (on ? `${ESC}1m${s}${ESC}0m` : s),
  dim: (s: string, on: boolean) => (on ? `${ESC}2m${s}${ESC}0m` : s),
  red: (s: string, on: boolean) => (on ? `${ESC}31m${s}${ESC}0m` : s),
  green: (s: string, on: boolean) => (on ? `${ESC}32m${s}${ESC}0m` : s),
  yellow: (s: string, on: boolean) => (on ? `${ESC}33m${s}${ESC}0m` : s),
};

/** A bar of `width` cells for a fraction in [0, 1], with eighth-block resolution. */
export function bar(fraction: number, width: number): string {
  const f = Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 0));
  const eighths = Math.round(f * width * 8);
  const full = Math.floor(eighths / 8);
  const part = eighths % 8;
  const partial = part > 0 ? " ▏▎▍▌▋▊▉"[part]! : "";
  return ("█".repeat(full) + partial).padEnd(width, "·");
}

function pad(s: string, n: number): string {
  return s.length >= n ? s.slice(0, n) : s + " ".repeat(n - s.length);
}

/** Bytes as KiB/MiB, short. */
export function fmtBytes(b: number): string {
  if (b >= 1024 * 1024) return `${(b / (1024 * 1024)).toFixed(1)} MiB`;
  if (b >= 1024) return `${(b / 1024).toFixed(1)} KiB`;
  return `${Math.round(b)} B`;
}

function pct(ppm: number | null): string {
  return ppm === null ? "?" : `${(ppm / 10_000).toFixed(1)}%`;
}

function streamLines(st: LiveStream, color: boolean): string[] {
  const lines: string[] = [];
  const r = st.refillPerSecond;
  lines.push(
    style.bold(
      `stream ${st.key}  (r = ${fmtBytes(r)}/s, clients offer ${st.multiple}× r)${st.active ? "" : " idle"}`,
      color,
    ),
  );
  lines.push(
    `${pad("region", 10)} ${pad("streamed, of r", 24)} ${"KiB/s".padStart(8)} ${"share".padStart(6)} ${"paused".padStart(7)}  ${"client held back".padStart(16)}`,
  );
  for (const g of st.regions) {
    const pausedCell = `${g.paused}/${g.connections}`.padStart(7);
    lines.push(
      `${pad(g.id, 10)} ${bar(r > 0 ? g.bytesPerSec / r : 0, 24)} ${style.green((g.bytesPerSec / 1024).toFixed(1).padStart(8), color)} ${pct(g.sharePpm).padStart(6)} ${g.paused > 0 ? style.yellow(pausedCell, color) : pausedCell}  ${fmtBytes(g.clientBufferedBytes).padStart(16)}`,
    );
  }
  const total = st.regions.reduce((a, g) => a + g.bytesPerSec, 0);
  lines.push(
    `${pad("all", 10)} ${bar(r > 0 ? total / r : 0, 24)} ${style.green((total / 1024).toFixed(1).padStart(8), color)}  = ${r > 0 ? ((total / r) * 100).toFixed(0) : "0"}% of r`,
  );
  return lines;
}

function rate(x: number): string {
  return x.toFixed(1).padStart(6);
}

/** The full-screen frame; `color` adds ANSI styles (the caller adds cursor control). */
export function renderFrame(s: LiveState, color = true): string {
  const lines: string[] = [];
  const t = `${(s.elapsedMs / 1000).toFixed(1)}s / ${(s.durationMs / 1000).toFixed(0)}s`;
  lines.push(style.bold(`geoquota demo  ${t}  scenario: ${s.scenario}`, color));
  lines.push(style.dim(pad(s.scenarioDescription, 80), color));
  lines.push(s.fault ? style.yellow(`fault: ${s.fault}`, color) : style.dim("fault: none", color));
  lines.push("");
  lines.push(style.bold(`${s.key}  (r = ${s.refillPerSecond.toFixed(2)}/s)`, color));
  lines.push(
    `${pad("region", 10)} ${pad("share", 32)} ${"ppm".padStart(7)} ${"adm/s".padStart(6)} ${"den/s".padStart(6)}`,
  );
  for (const r of s.regions) {
    const share = r.sharePpm === null ? "?" : String(r.sharePpm);
    const b = r.sharePpm === null ? "?".repeat(32) : bar(r.sharePpm / 1_000_000, 32);
    const tag = r.recovering
      ? style.yellow(" recovering", color)
      : r.errorsPerSec > 0
        ? style.red(" errors", color)
        : "";
    lines.push(
      `${pad(r.id, 10)} ${b} ${share.padStart(7)} ${style.green(rate(r.admittedPerSec), color)} ${rate(r.deniedPerSec)}${tag}`,
    );
  }
  const total = s.regions.reduce((a, r) => a + r.admittedPerSec, 0);
  lines.push(`${pad("all", 10)} ${" ".repeat(32)} ${"".padStart(7)} ${style.green(rate(total), color)}`);
  lines.push("");
  const frac = s.bound > 0 ? s.admitted / s.bound : 0;
  const within = s.admitted <= s.bound;
  const verdict = within ? style.green("≤", color) : style.red(">", color);
  lines.push(
    `global admitted ${s.admitted} ${verdict} bound C + r·T = ${s.bound.toFixed(1)}  ${bar(frac, 24)} ${(frac * 100).toFixed(1)}%`,
  );
  lines.push("");
  lines.push(style.bold("gossip links (lag as the first region sees the second)", color));
  const cells = s.links.map((l) => {
    const lag = !l.up
      ? style.red("down", color)
      : l.lagMs === null
        ? "  ? "
        : `${String(Math.round(l.lagMs)).padStart(4)}ms`;
    return `${pad(`${l.from}→${l.to}`, 20)} ${lag}`;
  });
  for (let i = 0; i < cells.length; i += 2) lines.push(cells.slice(i, i + 2).join("   "));
  lines.push("");
  if (s.stream) {
    lines.push(...streamLines(s.stream, color));
    lines.push("");
  }
  lines.push(
    style.dim(`requests sent ${s.sent}, shed at the in-flight cap ${s.shed}.  Ctrl-C stops the demo.`, color),
  );
  return `${lines.join("\n")}\n`;
}

/** Clears the screen and homes the cursor before the frame, so it redraws in place. */
export function ttyFrame(s: LiveState): string {
  return `${ESC}H${ESC}2J${renderFrame(s, true)}`;
}

/** One plain line per second for logs and CI (no ANSI). */
export function renderLine(s: LiveState): string {
  const shares = s.regions
    .map((r) => {
      const share = r.sharePpm === null ? "?" : `${(r.sharePpm / 10_000).toFixed(1)}%`;
      return `${r.id} share=${share}${r.recovering ? "(rec)" : ""} adm=${r.admittedPerSec.toFixed(0)}/s den=${r.deniedPerSec.toFixed(0)}/s`;
    })
    .join(" | ");
  const lags = s.links
    .map((l) => `${l.from}>${l.to}=${!l.up ? "down" : l.lagMs === null ? "?" : `${Math.round(l.lagMs)}ms`}`)
    .join(" ");
  const st = s.stream;
  const stream =
    st?.active === true
      ? ` | stream ${st.regions.map((g) => `${g.id}=${(g.bytesPerSec / 1024).toFixed(0)}KiB/s share=${pct(g.sharePpm)} paused=${g.paused}/${g.connections}`).join(" ")} all=${(st.regions.reduce((a, g) => a + g.bytesPerSec, 0) / 1024).toFixed(0)}KiB/s of r=${(st.refillPerSecond / 1024).toFixed(0)}KiB/s`
      : "";
  return `[${(s.elapsedMs / 1000).toFixed(0).padStart(3)}s] ${s.scenario}${s.fault ? ` (${s.fault})` : ""} | ${shares} | admitted ${s.admitted} of bound ${s.bound.toFixed(1)} | lag ${lags}${stream}\n`;
}
