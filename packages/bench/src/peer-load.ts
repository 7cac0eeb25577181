// Open-loop demand for the `peers` section: each region gets its rate whatever
// the answers (pacer.ts), over HTTP/1.1 keep-alive to that region's own limiter, and
// every answer is logged with its send time and latency. One generator for
// the three systems, so the only thing that differs is the limiter: the
// request each system takes and how its answer is read.
import { Agent, request } from "node:http";
import { Histogram } from "./histogram.js";
import { Pacer } from "./pacer.js";

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

const IN_FLIGHT_MAX = 256;
const TIMEOUT_MS = 2000;

export class PeerLoad {
  readonly answers: PeerAnswer[] = [];
  private readonly pacer: Pacer;
  private readonly agents: Agent[];

  constructor(private readonly call: DecisionCall) {
    this.pacer = new Pacer(call.urls.length, IN_FLIGHT_MAX, (r, settled) => this.send(r, settled));
    this.agents = call.urls.map(() => new Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX }));
  }

  /** Requests not sent because the region had IN_FLIGHT_MAX outstanding. */
  get shed(): number {
    return this.pacer.shed;
  }

  now(): number {
    return this.pacer.now();
  }

  /** Requests per second per region. */
  setRates(rates: readonly number[]): void {
    if (rates.length !== this.call.urls.length || rates.some((r) => !(r >= 0))) {
      throw new Error(`peer load: ${rates.length} rates ≥ 0 needed for ${this.call.urls.length} regions`);
    }
    this.pacer.setRates(rates);
  }

  start(): void {
    this.pacer.start();
  }

  private send(r: number, settled: () => void): void {
    const sent = performance.now();
    const sentMs = this.pacer.now();
    let answered = false;
    const done = (allowed: boolean | undefined) => {
      if (answered) return;
      answered = true;
      settled();
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
    await this.pacer.stop();
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
