// The chaos run's HTTP client: the demo's open-loop TrafficGenerator calls
// this sender, which also keeps, per answer, whether it was degraded (the
// demo's sender drops that field; the fail-closed check needs it).
// Keep-alive pools, loopback targets only, every request bounded in time.
import { Pool } from "undici";
import type { CheckSender } from "../demo/traffic.js";
import { OUTCOME } from "../demo/request-log.js";
import type { CheckRecord } from "./checks.js";

export interface ChaosSender {
  readonly send: CheckSender;
  readonly records: CheckRecord[];
  close(): Promise<void>;
}

export function chaosSender(
  urls: readonly string[],
  now: () => number,
  options: { timeoutMs?: number; recordsMax?: number } = {},
): ChaosSender {
  for (const u of urls) {
    const host = new URL(u).hostname;
    if (host !== "127.0.0.1" && host !== "localhost" && host !== "[::1]")
      throw new Error(`chaos traffic targets loopback only, got ${u}`);
  }
  const timeoutMs = options.timeoutMs ?? 5000;
  const recordsMax = options.recordsMax ?? 1_000_000;
  const pools = urls.map(
    (u) =>
      new Pool(u, {
        connections: 64,
        keepAliveTimeout: 30_000,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      }),
  );
  const records: CheckRecord[] = [];
  const send: CheckSender = async (region, body) => {
    const pool = pools[region];
    if (!pool) return { outcome: OUTCOME.error };
    const sentMs = now();
    try {
      const res = await pool.request({
        path: "/v1/check",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await res.body.json()) as { allowed?: unknown; degraded?: unknown };
      const allowed = res.statusCode === 200 && json.allowed === true;
      // 429, or 200 with allowed: false from a region with deniedStatus 200.
      const denied = (res.statusCode === 429 || res.statusCode === 200) && json.allowed === false;
      if (!allowed && !denied) return { outcome: OUTCOME.error };
      if (records.length < recordsMax)
        records.push({
          region,
          sentMs,
          answeredMs: now(),
          allowed,
          degraded: json.degraded === true,
          cost: body.cost,
        });
      return { outcome: allowed ? OUTCOME.allowed : OUTCOME.denied };
    } catch {
      return { outcome: OUTCOME.error };
    }
  };
  return {
    send,
    records,
    async close() {
      await Promise.allSettled(pools.map((p) => p.close()));
    },
  };
}
