// Open-loop traffic: each (region, key) stream sends at its configured rate
// whatever the answers (a closed loop would slow down exactly when the limiter
// pushes back, hiding overshoot). In-flight requests per region are capped;
// a request over the cap is shed (counted, never sent). The total is bounded by
// the request log's capacity and by stop().
import { Pool } from "undici";
import { OUTCOME, type RequestLog } from "./request-log.js";
import type { Demand, DemoKey } from "./types.js";

export interface CheckResult {
  readonly outcome: (typeof OUTCOME)[keyof typeof OUTCOME];
}

/** Sends one POST /v1/check to a region; never throws (an error is an outcome). */
export type CheckSender = (
  region: number,
  body: { tenant: string; resource: string; cost: number },
) => Promise<CheckResult>;

export interface TrafficOptions {
  readonly regionIds: readonly string[];
  readonly keys: readonly DemoKey[];
  readonly log: RequestLog;
  readonly send: CheckSender;
  /** Client monotonic clock, ms. */
  readonly now: () => number;
  readonly inFlightMax?: number;
  readonly tickMs?: number;
}

export interface TrafficCounters {
  sent: number;
  shed: number;
  inFlight: number;
}

export class TrafficGenerator {
  private readonly inFlightMax: number;
  private readonly tickMs: number;
  private demand: Demand = [];
  /** Fractional requests owed per stream, `${key}|${region}`. */
  private readonly credit = new Map<string, number>();
  private readonly inFlight: number[];
  private readonly pending = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private lastTickMs = 0;
  readonly counters: TrafficCounters = { sent: 0, shed: 0, inFlight: 0 };
  /** Shed requests per region (over the in-flight cap). */
  readonly shedByRegion: number[];

  constructor(private readonly opts: TrafficOptions) {
    this.inFlightMax = opts.inFlightMax ?? 64;
    this.tickMs = opts.tickMs ?? 10;
    this.inFlight = opts.regionIds.map(() => 0);
    this.shedByRegion = opts.regionIds.map(() => 0);
  }

  setDemand(demand: Demand): void {
    this.demand = demand;
  }

  start(): void {
    if (this.timer) return;
    this.lastTickMs = this.opts.now();
    this.timer = setInterval(() => this.tick(), this.tickMs);
  }

  /** One scheduling step; public so tests can drive it with an injected clock. */
  tick(): void {
    const now = this.opts.now();
    const dtS = Math.max(0, now - this.lastTickMs) / 1000;
    this.lastTickMs = now;
    for (const [k, perRegion] of this.demand.entries()) {
      const key = this.opts.keys[k];
      if (!key) continue;
      for (const [r, id] of this.opts.regionIds.entries()) {
        const rate = perRegion[id] ?? 0;
        const sk = `${k}|${r}`;
        if (rate <= 0) {
          this.credit.delete(sk);
          continue;
        }
        // Cap the debt at ~100 ms of demand: after an event-loop stall we do
        // not fire a catch-up burst that no real client would send.
        let c = Math.min((this.credit.get(sk) ?? 0) + rate * dtS, rate * 0.1 + 1);
        while (c >= 1) {
          c -= 1;
          this.fire(r, k, key);
        }
        this.credit.set(sk, c);
      }
    }
  }

  private fire(region: number, k: number, key: DemoKey): void {
    const log = this.opts.log;
    if (this.inFlight[region]! >= this.inFlightMax || log.size + this.counters.inFlight >= log.capacity) {
      this.counters.shed++;
      this.shedByRegion[region] = (this.shedByRegion[region] ?? 0) + 1;
      return;
    }
    this.inFlight[region] = this.inFlight[region]! + 1;
    this.counters.inFlight++;
    this.counters.sent++;
    const cost = 1;
    const sentMs = this.opts.now();
    const p = this.opts
      .send(region, { tenant: key.tenant, resource: key.resource, cost })
      .catch((): CheckResult => ({ outcome: OUTCOME.error }))
      .then((res) => {
        log.push({ sentMs, answeredMs: this.opts.now(), region, key: k, outcome: res.outcome, cost });
      })
      .finally(() => {
        this.inFlight[region] = this.inFlight[region]! - 1;
        this.counters.inFlight--;
        this.pending.delete(p);
      });
    this.pending.add(p);
  }

  /** Stops sending and waits for every request in flight to be answered and recorded. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}

/**
 * Keep-alive HTTP pools, one per region (loopback only), and the sender that
 * uses them. A request that times out is an error outcome: the oracle cannot
 * count it, so the summary reports how many there were.
 */
export function httpCheckSender(
  urls: readonly string[],
  options: { connections?: number; timeoutMs?: number } = {},
): { send: CheckSender; close(): Promise<void> } {
  for (const u of urls) {
    const host = new URL(u).hostname;
    if (host !== "127.0.0.1" && host !== "localhost" && host !== "[::1]")
      throw new Error(`demo traffic targets loopback only, got ${u}`);
  }
  const timeoutMs = options.timeoutMs ?? 5000;
  const pools = urls.map(
    (u) =>
      new Pool(u, {
        connections: options.connections ?? 64,
        keepAliveTimeout: 30_000,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      }),
  );
  const send: CheckSender = async (region, body) => {
    const pool = pools[region];
    if (!pool) return { outcome: OUTCOME.error };
    try {
      const res = await pool.request({
        path: "/v1/check",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await res.body.json()) as { allowed?: unknown };
      if (res.statusCode === 200 && json.allowed === true) return { outcome: OUTCOME.allowed };
      // A denial is 429, or 200 with allowed: false from a region with deniedStatus 200.
      if ((res.statusCode === 429 || res.statusCode === 200) && json.allowed === false)
        return { outcome: OUTCOME.denied };
      return { outcome: OUTCOME.error };
    } catch {
      return { outcome: OUTCOME.error };
    }
  };
  return {
    send,
    async close() {
      await Promise.allSettled(pools.map((p) => p.close()));
    },
  };
}
