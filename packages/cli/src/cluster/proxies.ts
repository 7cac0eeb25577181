import type { Toxiproxy } from "toxiproxy-node-client";

/** The HTTP status of a failed toxiproxy-node-client call ("Request failed with status code N"). */
export function toxiproxyStatus(err: unknown): number | undefined {
  const m = /status code (\d{3})\b/.exec(err instanceof Error ? err.message : String(err));
  return m === null ? undefined : Number(m[1]);
}

export interface BusyRetry {
  /** A status that, on a retry, means an earlier try landed after all (404 for a removal, 409 for an add). */
  readonly landed?: number;
  /** Give up (the last error) this long after the first try. */
  readonly deadlineMs?: number;
  readonly pauseMs?: number;
  /** Called with each 503 before the retry. */
  readonly onBusy?: (err: Error) => void;
}

/**
 * Runs one Toxiproxy API call, again while the API answers 503. Toxiproxy
 * wraps its API in a 25 s handler timeout (http.TimeoutHandler) that answers
 * 503 and lets the operation go on in the server: removing a latency toxic
 * flushes its buffered packets into the link, up to 5 s per packet when the
 * link downstream is stalled, and holds the proxy's lock meanwhile
 * (Shopify/toxiproxy#558, #500; seen in a 30-minute soak under load). The call
 * is usually not lost then, only late: retrying until it is done (or `landed`
 * says an earlier try was) is the heal, where failing would leave the link
 * faulty. A removal that never finishes keeps the API at 503 for good (soak
 * run B, docs/soak-30m.md): past the deadline the 503 is the call's error.
 */
export async function whileBusy<T>(op: () => Promise<T>, opts: BusyRetry = {}): Promise<T | undefined> {
  const deadline = Date.now() + (opts.deadlineMs ?? 120_000);
  let retried = false;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      const status = toxiproxyStatus(err);
      if (retried && status !== undefined && status === opts.landed) return undefined;
      if (status !== 503 || Date.now() >= deadline) throw err;
      retried = true;
      opts.onBusy?.(err as Error);
      await new Promise((r) => setTimeout(r, opts.pauseMs ?? 1000));
    }
  }
}

/** Disabling a proxy closes its connections and refuses new ones: a dead link. */
export async function setProxiesEnabled(
  api: Toxiproxy,
  proxies: readonly string[],
  enabled: boolean,
): Promise<void> {
  await Promise.all(
    proxies.map((name) =>
      whileBusy(async () => {
        const p = await api.get(name);
        await p.update({ enabled, listen: p.listen, upstream: p.upstream });
      }),
    ),
  );
}
