// Open-loop HTTP traffic to the regions of a local cluster: each region gets
// its configured rate whatever the answers (a closed loop would slow down
// exactly when the limiter pushes back). Bounded: in-flight per region, and
// the answer log's length.
import { Agent, request } from "node:http";

export interface Answer {
  readonly region: number;
  /** ms since the generator started. */
  readonly atMs: number;
  readonly allowed: boolean;
}

const TICK_MS = 10;
const IN_FLIGHT_MAX = 64;
const LOG_MAX = 2_000_000;

export class OpenLoop {
  readonly answers: Answer[] = [];
  errors = 0;
  shed = 0;
  private rates: number[];
  private readonly credit: number[];
  private readonly inFlight: number[];
  private readonly agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX });
  private readonly t0 = performance.now();
  private last = this.t0;
  private timer: NodeJS.Timeout | undefined;
  private readonly body: string;

  constructor(
    private readonly urls: readonly string[],
    tenant: string,
    resource: string,
  ) {
    this.rates = urls.map(() => 0);
    this.credit = urls.map(() => 0);
    this.inFlight = urls.map(() => 0);
    this.body = JSON.stringify({ tenant, resource });
  }

  now(): number {
    return performance.now() - this.t0;
  }

  /** Requests per second per region, in `urls` order. */
  setRates(rates: readonly number[]): void {
    this.rates = [...rates];
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
  }

  private tick(): void {
    const t = performance.now();
    const dtS = (t - this.last) / 1000;
    this.last = t;
    for (let r = 0; r < this.urls.length; r++) {
      this.credit[r] = (this.credit[r] ?? 0) + (this.rates[r] ?? 0) * dtS;
      while ((this.credit[r] ?? 0) >= 1) {
        this.credit[r] = (this.credit[r] ?? 0) - 1;
        if ((this.inFlight[r] ?? 0) >= IN_FLIGHT_MAX) this.shed++;
        else this.send(r);
      }
    }
  }

  private send(r: number): void {
    this.inFlight[r] = (this.inFlight[r] ?? 0) + 1;
    let settled = false;
    const done = (allowed: boolean | undefined) => {
      if (settled) return;
      settled = true;
      this.inFlight[r] = (this.inFlight[r] ?? 1) - 1;
      if (allowed === undefined) this.errors++;
      else if (this.answers.length < LOG_MAX) this.answers.push({ region: r, atMs: this.now(), allowed });
    };
    const req = request(
      `${this.urls[r]}/v1/check`,
      {
        method: "POST",
        agent: this.agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(this.body) },
        timeout: 5000,
      },
      (res) => {
        res.resume();
        res.on("end", () => done(res.statusCode === 200 ? true : res.statusCode === 429 ? false : undefined));
        res.on("error", () => done(undefined));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(undefined));
    req.end(this.body);
  }

  /** Stops sending and waits (bounded) for answers in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (let i = 0; i < 100 && this.inFlight.some((n) => n > 0); i++) {
      await new Promise((res) => setTimeout(res, 50));
    }
    this.agent.destroy();
  }

  /** Admissions answered in [fromMs, toMs), all regions or one. */
  admitted(fromMs: number, toMs: number, region?: number): number {
    let n = 0;
    for (const a of this.answers) {
      if (a.allowed && a.atMs >= fromMs && a.atMs < toMs && (region === undefined || a.region === region))
        n++;
    }
    return n;
  }
}
