// Open-loop demand for the `peers` section: each region gets its rate whatever
// the answers, over HTTP/1.1 keep-alive to that region's own limiter, and
// every answer is logged with its send time and latency. One generator for
// the three systems, so the only thing that differs is the limiter: the
// request each system takes and how its answer is read.
import { Agent, request } from "node:http";
import { Histogram } from "./histogram.js";

/** How one system is asked: its URL per region, one request body, and its answer read as admitted or not. */
export interface DecisionCall {
  /** Absolute URL per region (POST). */
  readonly urls: readonly string[];
  readonly body: string;
  /** true: admitted; false: denied; undefined: an error (no decision). */
  read(status: number, body: string): boolean | undefined;
}

export interface PeerAnswer {
  readonly region: number;
  /** ms since the generator started, at send. */
  readonly sentMs: number;
  readonly latencyUs: number;
  /** undefined: an error (refused, 5xx, timed out, unreadable). */
  readonly allowed: boolean | undefined;
}

const TICK_MS = 10;
const IN_FLIGHT_MAX = 256;
const TIMEOUT_MS = 2000;

export class PeerLoad {
  readonly answers: PeerAnswer[] = [];
  /** Requests not sent because the region had IN_FLIGHT_MAX outstanding. */
  shed = 0;
  private rates: number[];
  private readonly credit: number[];
  private readonly inFlight: number[];
  private readonly agents: Agent[];
  private readonly t0 = performance.now();
  private last = this.t0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly call: DecisionCall) {
    this.rates = call.urls.map(() => 0);
    this.credit = call.urls.map(() => 0);
    this.inFlight = call.urls.map(() => 0);
    this.agents = call.urls.map(() => new Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX }));
  }

  now(): number {
    return performance.now() - this.t0;
  }

  /** Requests per second per region. */
  setRates(rates: readonly number[]): void {
    if (rates.length !== this.call.urls.length || rates.some((r) => !(r >= 0))) {
      throw new Error(`peer load: ${rates.length} rates ≥ 0 needed for ${this.call.urls.length} regions`);
    }
    this.rates = [...rates];
  }

  start(): void {
    this.last = performance.now();
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
  }

  private tick(): void {
    const t = performance.now();
    const dtS = (t - this.last) / 1000;
    this.last = t;
    for (let r = 0; r < this.rates.length; r++) {
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
    const sent = performance.now();
    const sentMs = sent - this.t0;
    let settled = false;
    const done = (allowed: boolean | undefined) => {
      if (settled) return;
      settled = true;
      this.inFlight[r] = (this.inFlight[r] ?? 1) - 1;
      this.answers.push({ region: r, sentMs, latencyUs: (performance.now() - sent) * 1000, allowed });
    };
    const req = request(
      this.call.urls[r]!,
      {
        method: "POST",
        agent: this.agents[r],
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(this.call.body) },
        timeout: TIMEOUT_MS,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          try {
            done(this.call.read(res.statusCode ?? 0, text));
          } catch {
            done(undefined);
          }
        });
        res.on("error", () => done(undefined));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(undefined));
    req.end(this.call.body);
  }

  /** Stops sending and waits (bounded) for the answers in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (let i = 0; i < 100 && this.inFlight.some((n) => n > 0); i++) {
      await new Promise((res) => setTimeout(res, 50));
    }
    for (const a of this.agents) a.destroy();
  }
}

export interface WindowFigures {
  readonly fromMs: number;
  readonly toMs: number;
  readonly sent: number;
  readonly admitted: number;
  readonly denied: number;
  readonly errors: number;
  /** The exact bound C + r·T, T from the window's start to its last answer (a decision lies between). */
  readonly bound: number;
  /** admitted ÷ bound: above 1 is over-admission. */
  readonly admittedOverBound: number;
  /** (admitted + errors) ÷ bound: what a caller that fails open on an error (Envoy's default) lets through. */
  readonly failOpenOverBound: number;
  /** Decision latency of the window's answered requests (errors included: a caller waits for them too). */
  readonly p50Us: number;
  readonly p99Us: number;
}

/**
 * The figures of the requests sent in [fromMs, toMs), against the bound C + r·T
 * (docs/design.md's oracle: Σ admitted ≤ C + r·(last answer − first send)).
 */
export function windowFigures(
  answers: readonly PeerAnswer[],
  fromMs: number,
  toMs: number,
  limit: { readonly capacity: number; readonly refillPerSecond: number },
): WindowFigures {
  const h = new Histogram();
  let admitted = 0;
  let denied = 0;
  let errors = 0;
  let lastAnswerMs = fromMs;
  for (const a of answers) {
    if (a.sentMs < fromMs || a.sentMs >= toMs) continue;
    h.record(a.latencyUs);
    lastAnswerMs = Math.max(lastAnswerMs, a.sentMs + a.latencyUs / 1000);
    if (a.allowed === true) admitted++;
    else if (a.allowed === false) denied++;
    else errors++;
  }
  const bound = limit.capacity + (limit.refillPerSecond * (lastAnswerMs - fromMs)) / 1000;
  return {
    fromMs,
    toMs,
    sent: admitted + denied + errors,
    admitted,
    denied,
    errors,
    bound,
    admittedOverBound: admitted / bound,
    failOpenOverBound: (admitted + errors) / bound,
    p50Us: h.quantileUs(0.5),
    p99Us: h.quantileUs(0.99),
  };
}
