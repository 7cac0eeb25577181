// Open-loop HTTP traffic to the regions of a local cluster: each region gets
// its configured rate whatever the answers (pacer.ts). Bounded: in-flight per region, and
// the answer log's length.
import { Agent, request } from "node:http";
import { Pacer } from "./pacer.js";

export interface Answer {
  readonly region: number;
  /** ms since the generator started. */
  readonly atMs: number;
  readonly allowed: boolean;
}

const IN_FLIGHT_MAX = 64;
const LOG_MAX = 2_000_000;

export class OpenLoop {
  readonly answers: Answer[] = [];
  errors = 0;
  private readonly pacer: Pacer;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX });
  private readonly body: string;

  constructor(
    private readonly urls: readonly string[],
    tenant: string,
    resource: string,
  ) {
    this.pacer = new Pacer(urls.length, IN_FLIGHT_MAX, (r, settled) => this.send(r, settled));
    this.body = JSON.stringify({ tenant, resource });
  }

  /** Requests not sent because the region had IN_FLIGHT_MAX outstanding. */
  get shed(): number {
    return this.pacer.shed;
  }

  now(): number {
    return this.pacer.now();
  }

  /** Requests per second per region, in `urls` order. */
  setRates(rates: readonly number[]): void {
    this.pacer.setRates(rates);
  }

  start(): void {
    this.pacer.start();
  }

  private send(r: number, settled: () => void): void {
    let answered = false;
    const done = (allowed: boolean | undefined) => {
      if (answered) return;
      answered = true;
      settled();
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
    await this.pacer.stop();
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
