// Samples the cluster twice a second: each region's view of the main key
// (share, recovery) from GET /v1/quotas and each daemon's link lag from its
// /v1/status. A region that does not answer in time is a null sample, not an
// error: during faults that is exactly what the view should show.
import type { ClusterSample } from "./types.js";

export interface PollTarget {
  readonly id: string;
  /** Limiter base URL. */
  readonly url: string;
  /** Gossip daemon HTTP base URL. */
  readonly gossipUrl: string;
}

async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) {
      await res.body?.cancel();
      return undefined;
    }
    return await res.json();
  } catch {
    return undefined;
  }
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Parses what the limiter and the daemon answered into one sample (pure, for tests). */
export function toSample(
  tMs: number,
  ids: readonly string[],
  quotas: readonly unknown[],
  statuses: readonly unknown[],
): ClusterSample {
  const regions: Record<string, ClusterSample["regions"][string]> = {};
  const links: Record<string, ClusterSample["links"][string]> = {};
  for (const [i, id] of ids.entries()) {
    const q = quotas[i] as { share?: unknown; recovering?: unknown; tokens?: unknown } | undefined;
    const share = num(q?.share);
    regions[id] =
      share === null
        ? null
        : { sharePpm: share, recovering: q?.recovering === true, tokens: num(q?.tokens) ?? 0 };
    const st = statuses[i] as { peers?: Record<string, { up?: unknown; lagMs?: unknown }> } | undefined;
    for (const peer of ids) {
      if (peer === id) continue;
      const p = st?.peers?.[peer];
      links[`${id}>${peer}`] = { up: p?.up === true, lagMs: num(p?.lagMs) };
    }
  }
  return { tMs, regions, links };
}

export class ClusterPoller {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  readonly samples: ClusterSample[] = [];
  latest: ClusterSample | undefined;

  constructor(
    private readonly targets: readonly PollTarget[],
    private readonly tenant: string,
    private readonly resource: string,
    private readonly now: () => number,
    private readonly options: { intervalMs?: number; samplesMax?: number } = {},
  ) {}

  start(): void {
    if (this.timer) return;
    const intervalMs = this.options.intervalMs ?? 500;
    void this.poll();
    this.timer = setInterval(() => void this.poll(), intervalMs);
  }

  async poll(): Promise<ClusterSample | undefined> {
    if (this.busy) return undefined; // never pile up polls behind a slow region
    this.busy = true;
    try {
      const tMs = this.now();
      const path = `/v1/quotas/${encodeURIComponent(this.tenant)}/${encodeURIComponent(this.resource)}`;
      const [quotas, statuses] = await Promise.all([
        Promise.all(this.targets.map((t) => getJson(`${t.url}${path}`, 400))),
        Promise.all(this.targets.map((t) => getJson(`${t.gossipUrl}/v1/status`, 400))),
      ]);
      const s = toSample(
        tMs,
        this.targets.map((t) => t.id),
        quotas,
        statuses,
      );
      this.latest = s;
      if (this.samples.length < (this.options.samplesMax ?? 10_000)) this.samples.push(s);
      return s;
    } finally {
      this.busy = false;
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
  }
}
