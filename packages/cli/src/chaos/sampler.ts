// Samples every region's view of one key (GET /v1/quotas/:tenant/:resource)
// on one shared tick, ≤ 50 ms apart: the share in use, recovery, the CRDT
// counters and the region's Redis TIME (`nowUs`) the view was computed at.
// checks.ts pairs samples by the client's clock (tMs, answeredMs), not by
// `nowUs`: a soak steps the regions' Redis clocks apart (libfaketime). A region
// that does not answer in time leaves a gap, never an error: during faults
// that is what there is to see. A slow region never delays the others.

export interface QuotaSample {
  readonly region: number;
  /** Client clock, ms: request sent and answer received. */
  readonly tMs: number;
  readonly answeredMs: number;
  /** The region's Redis TIME when the view was computed, µs. */
  readonly nowUs: number;
  readonly sharePpm: number;
  readonly recovering: boolean;
  /** CRDT counters, `a|replica` admitted, `n|replica` refunded, `d|replica` denied. */
  readonly counters: ReadonlyMap<string, number>;
  /** The view's loans, compact (`in <lender> <units>#<seq>`, `out …`, `r <lender>=<seq>`), for the report. */
  readonly loans?: string | undefined;
}

/** One daemon's state: its Redis ready and every peer's link up? */
export interface LinkSample {
  readonly region: number;
  readonly tMs: number;
  readonly answeredMs: number;
  readonly allUp: boolean;
}

export interface SamplerOptions {
  readonly urls: readonly string[];
  /** Gossip daemon HTTP base URLs (Redis and link status, sampled every 4th tick). */
  readonly gossipUrls?: readonly string[];
  readonly tenant: string;
  readonly resource: string;
  readonly now: () => number;
  readonly intervalMs?: number;
  readonly timeoutMs?: number;
  /** Bound on stored samples (all regions together). */
  readonly samplesMax?: number;
}

const COUNTER_KINDS = [
  ["admitted", "a"],
  ["refunded", "n"],
  ["denied", "d"],
] as const;

/** Parses one /v1/quotas body; null when it is not a view (pure, for tests). */
export function parseQuotaView(
  region: number,
  tMs: number,
  answeredMs: number,
  body: unknown,
): QuotaSample | null {
  if (!body || typeof body !== "object") return null;
  const b = body as Record<string, unknown>;
  if (typeof b.share !== "number" || typeof b.nowUs !== "number") return null;
  const counters = new Map<string, number>();
  const c = (b.counters ?? {}) as Record<string, unknown>;
  for (const [field, prefix] of COUNTER_KINDS) {
    const entries = c[field];
    if (!entries || typeof entries !== "object") continue;
    for (const [replica, v] of Object.entries(entries as Record<string, unknown>))
      if (typeof v === "number") counters.set(`${prefix}|${replica}`, v);
  }
  return {
    region,
    tMs,
    answeredMs,
    nowUs: b.nowUs,
    sharePpm: b.share,
    recovering: b.recovering === true,
    counters,
    loans: loansOf(b.loans),
  };
}

/** A view's `loans` ({ out: [{borrower, units, seq}], in: [{lender, units, seq}] }) as one short line. */
function loansOf(v: unknown): string | undefined {
  if (!v || typeof v !== "object") return undefined;
  const l = v as { out?: unknown; in?: unknown };
  const parts: string[] = [];
  const list = (xs: unknown, dir: string, who: string) => {
    if (!Array.isArray(xs)) return;
    for (const x of xs as Record<string, unknown>[])
      parts.push(
        `${dir} ${String(x[who])} ${String(x.units)}#${String(x.seq)}@${String(x.deadlineUs ?? "")}`,
      );
  };
  list(l.in, "in", "lender");
  list(l.out, "out", "borrower");
  return parts.join(", ");
}

export class QuotaSampler {
  readonly samples: QuotaSample[] = [];
  readonly links: LinkSample[] = [];
  /** Requests that got no usable view (timeout, 503 while its Redis is away). */
  misses = 0;
  private readonly busy: boolean[];
  private readonly linkBusy: boolean[];
  private ticks = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly o: SamplerOptions) {
    this.busy = o.urls.map(() => false);
    this.linkBusy = (o.gossipUrls ?? []).map(() => false);
  }

  start(): void {
    if (this.timer) return;
    this.tick();
    this.timer = setInterval(() => this.tick(), this.o.intervalMs ?? 40);
  }

  private tick(): void {
    if (this.ticks++ % 4 === 0) this.tickLinks();
    const path = `/v1/quotas/${encodeURIComponent(this.o.tenant)}/${encodeURIComponent(this.o.resource)}`;
    for (const [i, url] of this.o.urls.entries()) {
      if (this.busy[i]) continue; // never pile up requests behind a slow region
      if (this.samples.length >= (this.o.samplesMax ?? 200_000)) return;
      this.busy[i] = true;
      const p = this.sampleOne(i, `${url}${path}`).finally(() => {
        this.busy[i] = false;
        this.pending.delete(p);
      });
      this.pending.add(p);
    }
  }

  private tickLinks(): void {
    for (const [i, url] of (this.o.gossipUrls ?? []).entries()) {
      if (this.linkBusy[i] || this.links.length >= (this.o.samplesMax ?? 200_000)) continue;
      this.linkBusy[i] = true;
      const p = this.linkOne(i, url).finally(() => {
        this.linkBusy[i] = false;
        this.pending.delete(p);
      });
      this.pending.add(p);
    }
  }

  /** A daemon is connected when its Redis is ready (/readyz) and it sees every peer up (/v1/status). */
  private async linkOne(region: number, base: string): Promise<void> {
    const tMs = this.o.now();
    const signal = AbortSignal.timeout(this.o.timeoutMs ?? 300);
    try {
      const [status, ready] = await Promise.all([
        fetch(`${base}/v1/status`, { signal }),
        fetch(`${base}/readyz`, { signal }),
      ]);
      await ready.body?.cancel();
      if (!status.ok) return void (await status.body?.cancel());
      const body = (await status.json()) as { peers?: Record<string, { up?: unknown }> };
      const peers = Object.values(body.peers ?? {});
      const allUp = ready.ok && peers.every((p) => p.up === true);
      this.links.push({ region, tMs, answeredMs: this.o.now(), allUp });
    } catch {
      // a daemon that does not answer (killed, restarting) is simply not up
    }
  }

  private async sampleOne(region: number, url: string): Promise<void> {
    const tMs = this.o.now();
    let body: unknown;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(this.o.timeoutMs ?? 300) });
      body = res.ok ? await res.json() : await res.body?.cancel();
    } catch {
      body = undefined;
    }
    const s = parseQuotaView(region, tMs, this.o.now(), body);
    if (s) this.samples.push(s);
    else this.misses++;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}
