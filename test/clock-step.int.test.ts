// Issue 26 point 4: real clock faults on a real 2-region cluster. Region 2's
// redis-server runs under libfaketime (the libc-malloc build bootstrap.sh puts
// in .bin/: Debian's jemalloc build aborts under it), its TIME following a
// file the test rewrites: stepped 1.5 s (6ε) forward, back, then drifted
// forward 50 ms per 200 ms. Region 1 is hot and borrows from region 2
// throughout. The daemons' clock check must take the pair out of lending at
// each fault and back in once the clocks agree, and the global bound holds
// exactly over the whole run.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Cluster, regionIds, startCluster } from "@geoquota/cli";
import { type Admission, checkGlobalBound, repoRoot } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const policiesFile = fileURLToPath(new URL("./fixtures/policies-fast.json", import.meta.url));
const limit = { capacity: 100, refillPerSecond: 100 };
const body = JSON.stringify({ tenant: "hot_tenant", resource: "api" });
const redisLibc = process.env.GQ_REDIS_FAKETIME_SERVER ?? join(repoRoot, ".bin", "redis-server-libc");
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

interface ClockView {
  offsetUs: number | null;
  uncertaintyUs: number | null;
  excluded: boolean;
  reason: string;
}

async function clockOf(gossipUrl: string, peer: string): Promise<ClockView | undefined> {
  const res = await fetch(`${gossipUrl}/v1/status`);
  const status = (await res.json()) as { clock?: Record<string, ClockView> };
  return status.clock?.[peer];
}

async function until(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("clock faults on a real Redis (libfaketime)", () => {
  let cluster: Cluster;
  let dir = "";
  let offsetFile = "";
  const ids = regionIds(2);
  const [hotId, skewedId] = ids as [string, string];

  beforeAll(async () => {
    for (const f of [redisLibc, libfaketime])
      if (!existsSync(f)) throw new Error(`${f} is missing: run scripts/bootstrap.sh`);
    dir = mkdtempSync(join(tmpdir(), "gq-clock-"));
    offsetFile = join(dir, "offset");
    writeFileSync(offsetFile, "+0s\n");
    cluster = await startCluster({
      regions: 2,
      policiesFile,
      redis: {
        [skewedId]: {
          binary: redisLibc,
          env: {
            LD_PRELOAD: libfaketime,
            FAKETIME_TIMESTAMP_FILE: offsetFile,
            // Re-read the file on every clock call (a step takes effect at once);
            // Redis's own timers keep the real monotonic clock.
            FAKETIME_NO_CACHE: "1",
            FAKETIME_DONT_FAKE_MONOTONIC: "1",
          },
        },
      },
    });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("steps forward and back and a drift are detected (the pair leaves lending and comes back) and the global bound holds", async () => {
    const hot = cluster.regions.find((r) => r.id === hotId);
    const skewed = cluster.regions.find((r) => r.id === skewedId);
    if (hot === undefined || skewed === undefined) throw new Error("regions missing");
    const samples: Admission[] = [];
    const t0 = performance.now();
    let driving = true;
    const drive = async (url: string, perSecond: number) => {
      const inflight = new Set<Promise<void>>();
      const start = performance.now();
      let sent = 0;
      while (driving) {
        const due = Math.floor(((performance.now() - start) / 1000) * perSecond);
        while (sent < due && inflight.size < 64) {
          const sentMs = performance.now() - t0;
          const p = fetch(`${url}/v1/check`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          })
            .then(async (res) => {
              await res.arrayBuffer();
              if (res.status !== 200 && res.status !== 429) throw new Error(`HTTP ${res.status}`);
              const allowed = res.status === 200;
              samples.push({ sentMs, answeredMs: performance.now() - t0, cost: allowed ? 1 : 0 });
            })
            .finally(() => inflight.delete(p));
          inflight.add(p);
          sent++;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      await Promise.all(inflight);
    };
    const traffic = Promise.all([drive(hot.url, 3 * limit.refillPerSecond), drive(skewed.url, 2)]);
    const transitions: string[] = [];
    try {
      const inRange = async () => (await clockOf(hot.gossipUrl, skewedId))?.excluded === false;
      const outOfRange = async () => (await clockOf(hot.gossipUrl, skewedId))?.excluded === true;
      const peerOut = async () => (await clockOf(skewed.gossipUrl, hotId))?.excluded === true;
      await until("the clocks agree at start", 20_000, inRange);
      transitions.push("in");
      // The hot region borrows before the fault (loans are out when it comes).
      await new Promise((r) => setTimeout(r, 3000));

      // Step forward by 6ε.
      writeFileSync(offsetFile, "+1.5s\n");
      await until("the forward step is detected", 10_000, outOfRange);
      await until("the stepped region excludes the hot one too", 10_000, peerOut);
      transitions.push("out (step forward)");
      const seen = await clockOf(hot.gossipUrl, skewedId);
      expect(seen?.offsetUs ?? 0).toBeGreaterThan(1_000_000);

      // Step back by the same amount: in range again (hysteresis: at ≤ ¼·2ε).
      writeFileSync(offsetFile, "+0s\n");
      await until("the step back is seen as in range", 15_000, inRange);
      transitions.push("in (stepped back)");
      await new Promise((r) => setTimeout(r, 2000));

      // Drift: 50 ms ahead more every 200 ms, up to 1.5 s.
      let detectedAtMs: number | undefined;
      for (let ms = 50; ms <= 1500; ms += 50) {
        writeFileSync(offsetFile, `+${(ms / 1000).toFixed(3)}s\n`);
        await new Promise((r) => setTimeout(r, 200));
        if (detectedAtMs === undefined && (await outOfRange())) detectedAtMs = ms;
      }
      if (detectedAtMs === undefined) await until("the drift is detected", 10_000, outOfRange);
      transitions.push(`out (drift, at +${detectedAtMs ?? 1500} ms)`);
      // The 2ε budget (500 ms): the check fires at safeFraction·2ε = 250 ms plus what a round lags.
      expect(detectedAtMs ?? 1500).toBeLessThanOrEqual(500);
      writeFileSync(offsetFile, "+0s\n");
      await until("back in range after the drift", 15_000, inRange);
      transitions.push("in");
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      driving = false;
      await traffic;
    }
    expect(transitions).toHaveLength(5);

    // Each exclusion counted once, on the daemon's /metrics.
    const metrics = await (await fetch(`${hot.gossipUrl}/metrics`)).text();
    const exclusions = new RegExp(
      `^geoquota_clock_exclusions_total\\{peer="${skewedId}"\\} (\\d+)`,
      "m",
    ).exec(metrics);
    // Two faults, two exclusions at least (a loaded machine may add one for a late sample).
    expect(Number(exclusions?.[1])).toBeGreaterThanOrEqual(2);
    expect(metrics).toMatch(new RegExp(`^geoquota_clock_offset_seconds\\{peer="${skewedId}"\\} `, "m"));

    // Loans were out (the quiet region lent to the hot one) and the bound held exactly.
    const lender = await (await fetch(`${skewed.gossipUrl}/metrics`)).text();
    const granted = /^geoquota_gossip_loans_total\{event="granted"\} (\d+)/m.exec(lender);
    expect(Number(granted?.[1] ?? 0), "loans granted by the skewed region").toBeGreaterThan(0);
    const verdict = checkGlobalBound(samples, limit);
    expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
  }, 180_000);
});
