// Toxiproxy's API answers 503 after 25 s (its http.TimeoutHandler) and lets
// the operation go on in the server: removing a latency toxic whose link is
// stalled downstream flushes each buffered packet with a 5 s timeout, holding
// the proxy's lock (Shopify/toxiproxy#558, #500). A 30-minute soak under load
// failed its heal of a latency spike so ("Request failed with status code
// 503") while the cluster recovered. The chaos code retries a 503 until the
// call is done, or a retry's status says an earlier try landed.
import net from "node:net";
import { startToxiproxy, type ToxiproxyServer } from "@geoquota/procs";
import { afterEach, describe, expect, it } from "vitest";
import { toxiproxyStatus, whileBusy } from "../../packages/cli/src/cluster/proxies.js";
import { removeToxic } from "../../packages/cli/src/chaos/toxics.js";

const busy = () => new Error("Request failed with status code 503");

describe("whileBusy: a Toxiproxy call answered 503 is tried again", () => {
  it("retries 503 until the call succeeds; any other status fails at once", async () => {
    let calls = 0;
    const seen: string[] = [];
    const ok = await whileBusy(
      async () => {
        calls += 1;
        if (calls < 3) throw busy();
        return "done";
      },
      { pauseMs: 1, onBusy: (e) => seen.push(e.message) },
    );
    expect(ok).toBe("done");
    expect(seen).toHaveLength(2);
    await expect(
      whileBusy(
        async () => {
          throw new Error("Request failed with status code 404");
        },
        { landed: 404, pauseMs: 1 },
      ),
    ).rejects.toThrow("404");
  });
  it("a retry's `landed` status means an earlier try took effect; past the deadline the 503 is the error", async () => {
    let calls = 0;
    await expect(
      whileBusy(
        async () => {
          calls += 1;
          throw new Error(`Request failed with status code ${calls === 1 ? 503 : 404}`);
        },
        { landed: 404, pauseMs: 1 },
      ),
    ).resolves.toBeUndefined();
    await expect(
      whileBusy(async () => Promise.reject(busy()), { deadlineMs: 20, pauseMs: 5 }),
    ).rejects.toThrow("503");
    expect(toxiproxyStatus(new Error("fetch failed"))).toBeUndefined();
  });
});

describe("a real Toxiproxy whose toxic removal outlasts its API timeout", () => {
  let toxi: ToxiproxyServer | undefined;
  const closers: Array<() => void> = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) c();
    await toxi?.stop();
    toxi = undefined;
  });

  it("removes a latency toxic over a stalled link: the 503 is retried until the toxic is gone", async () => {
    toxi = await startToxiproxy();
    // The upstream reads nothing until told: the link behind the toxic stalls.
    const peers: net.Socket[] = [];
    const sink = net.createServer((s) => {
      s.pause();
      peers.push(s);
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    closers.push(() => sink.close());
    const { port, proxy } = await toxi.proxy("busy", `127.0.0.1:${(sink.address() as net.AddressInfo).port}`);
    await proxy.addToxic({
      name: "spike",
      type: "latency",
      stream: "upstream",
      toxicity: 1,
      attributes: { latency: 1000, jitter: 0 } as never,
    });
    const client = net.connect(port, "127.0.0.1");
    client.on("error", () => {});
    closers.push(() => client.destroy());
    await new Promise((r) => client.once("connect", r));
    let pumping = true;
    closers.push(() => {
      pumping = false;
    });
    const chunk = Buffer.alloc(32 * 1024, 1);
    void (async () => {
      while (pumping && !client.destroyed) {
        const drained = client.write(chunk);
        await new Promise((r) => (drained ? setImmediate(r) : setTimeout(r, 5)));
      }
    })();
    await new Promise((r) => setTimeout(r, 3000));

    const busyAt: number[] = [];
    const t0 = Date.now();
    const removal = removeToxic(toxi.api, "busy", "spike", {
      onBusy: () => {
        busyAt.push(Date.now() - t0);
        // The stall ends after the first 503 (in the soak: the peer's link healed).
        for (const s of peers) s.resume();
      },
    });
    await removal;
    expect(busyAt.length, "Toxiproxy answered the first removal within its 25 s timeout").toBeGreaterThan(0);
    expect(busyAt[0]).toBeGreaterThanOrEqual(24_000);
    const toxics = (await (await fetch(`${toxi.url}/proxies/busy/toxics`)).json()) as Array<{ name: string }>;
    expect(toxics.map((t) => t.name)).toEqual([]);
  }, 120_000);
});
