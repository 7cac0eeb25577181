// The open-loop pacing the load generators share (open-loop.ts for the chaos
// runs and the demo, peer-load.ts for the `peers` section): each region is sent
// its rate whatever the answers (a closed loop would slow down exactly when the
// limiter pushes back), by a credit per region topped up every tick; a send is
// shed, not queued, while the region has `inFlightMax` outstanding.

const TICK_MS = 10;

/** Sends one request to `region`; calls `settled` once, when it is answered or failed. */
export type PacedSend = (region: number, settled: () => void) => void;

export class Pacer {
  /** Requests not sent because the region had `inFlightMax` outstanding. */
  shed = 0;
  private readonly t0 = performance.now();
  private rates: number[];
  private readonly credit: number[];
  private readonly inFlight: number[];
  private last = this.t0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    regions: number,
    private readonly inFlightMax: number,
    private readonly send: PacedSend,
  ) {
    this.rates = Array.from({ length: regions }, () => 0);
    this.credit = Array.from({ length: regions }, () => 0);
    this.inFlight = Array.from({ length: regions }, () => 0);
  }

  /** ms since the pacer was made. */
  now(): number {
    return performance.now() - this.t0;
  }

  /** Requests per second per region, in region order. */
  setRates(rates: readonly number[]): void {
    this.rates = [...rates];
  }

  /** Starts sending (credit accrues from now, not from construction). */
  start(): void {
    if (this.timer !== undefined) return;
    this.last = performance.now();
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  private tick(): void {
    const t = performance.now();
    const dtS = (t - this.last) / 1000;
    this.last = t;
    for (let r = 0; r < this.credit.length; r++) {
      this.credit[r] = (this.credit[r] ?? 0) + (this.rates[r] ?? 0) * dtS;
      while ((this.credit[r] ?? 0) >= 1) {
        this.credit[r] = (this.credit[r] ?? 0) - 1;
        if ((this.inFlight[r] ?? 0) >= this.inFlightMax) this.shed++;
        else this.dispatch(r);
      }
    }
  }

  private dispatch(r: number): void {
    this.inFlight[r] = (this.inFlight[r] ?? 0) + 1;
    let settled = false;
    this.send(r, () => {
      if (settled) return;
      settled = true;
      this.inFlight[r] = (this.inFlight[r] ?? 1) - 1;
    });
  }

  /** Stops sending and waits (bounded: 5 s) for the requests in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (let i = 0; i < 100 && this.inFlight.some((n) => n > 0); i++) {
      await new Promise((res) => setTimeout(res, 50));
    }
  }
}
