// Issue 26 point 4: real clock faults on a real 2-region cluster. Region 2's
// redis-server runs under libfaketime (the libc-malloc build bootstrap.sh puts
// in .bin/: Debian's jemalloc build aborts under it), its TIME following a
// file the test rewrites: stepped 1.5 s (6ε) forward and back to true time,
// twice, then drifted forward 25 ms per 200 ms up to 1.5 s and stepped back.
//
// The workload is the one a forward step of a lender's clock endangers: region
// 2 is quiet (2 req/s) and lends most of its share to region 1, which is hot
// (2.5·r) and borrows all it can throughout. A lender whose clock jumps 1.5 s
// ahead sees its loans lapse (deadline + ε on its clock) up to 1.25 s before
// the borrower stops using them (deadline − ε on its own), and re-lends the
// freed units to the same hot borrower, which then uses old and new loans at
// once: about 0.45·r more than r for up to a second per step. C is small
// (20, r = 100/s) so that excess is not hidden by the burst term of C + r·T.
// With the clock check off, the exact oracle fails (planted row
// clock-step-real-detector-off); with it on, the borrower refuses the
// re-lent units (it judges the lender's clock frame on arrival, before the
// grants that follow it on the link), returns the old loans early, and the
// bound holds.
//
// The schedule is fixed (no step waits on the detector), so with the check off
// the run is the same and it is the bound that fails, not a timeout. The
// detector is watched from the outside meanwhile (`/v1/status` of both
// daemons every 100 ms, the offset gauge, the exclusion counter and the log).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Cluster, regionIds, startCluster } from "@geoquota/cli";
import { type Admission, checkGlobalBound, repoRoot } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const policiesFile = fileURLToPath(new URL("./fixtures/policies-clock.json", import.meta.url));
const limit = { capacity: 20, refillPerSecond: 100 };
const HOT_PER_SECOND = 2.5 * limit.refillPerSecond;
const body = JSON.stringify({ tenant: "hot_tenant", resource: "api" });
const redisLibc = process.env.GQ_REDIS_FAKETIME_SERVER ?? join(repoRoot, ".bin", "redis-server-libc");
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/** 2ε with the default ε = 250 ms: the offset the protocol tolerates. */
const TWO_EPS_MS = 500;

interface ClockView {
  offsetUs: number | null;
  uncertaintyUs: number | null;
  excluded: boolean;
  reason: string;
}

async function clockOf(gossipUrl: string, peer: string): Promise<ClockView | undefined> {
  const res = await fetch(`${gossipUrl}/v1/status`, { signal: AbortSignal.timeout(2000) });
  const status = (await res.json()) as { clock?: Record<string, ClockView> };
  return status.clock?.[peer];
}

async function metricOf(gossipUrl: string, name: string, labels: string): Promise<number | undefined> {
  const text = await (await fetch(`${gossipUrl}/metrics`)).text();
  const m = new RegExp(`^${name}\\{${labels}\\} (\\S+)`, "m").exec(text);
  return m === null ? undefined : Number(m[1]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One phase of the fixed schedule: the skewed clock's offset (or a drift to it), held for holdMs. */
interface Phase {
  readonly label: string;
  readonly offsetMs: number;
  readonly driftMsPer200?: number;
  readonly holdMs: number;
  /** Whether the pair must be out of lending during the phase (else back in). */
  readonly out: boolean;
}

const SCHEDULE: readonly Phase[] = [
  { label: "step forward +1.5 s", offsetMs: 1500, holdMs: 4000, out: true },
  { label: "step back to true time", offsetMs: 0, holdMs: 5000, out: false },
  { label: "step forward +1.5 s again", offsetMs: 1500, holdMs: 4000, out: true },
  { label: "step back again", offsetMs: 0, holdMs: 5000, out: false },
  {
    label: "drift forward 25 ms per 200 ms to +1.5 s",
    offsetMs: 1500,
    driftMsPer200: 25,
    holdMs: 2000,
    out: true,
  },
  { label: "step back after the drift", offsetMs: 0, holdMs: 5000, out: false },
];

/** What the watcher saw in one phase. */
interface Seen {
  /** The hot region excluded the skewed one / the skewed one excluded the hot one, at some poll. */
  hotOut: boolean;
  skewedOut: boolean;
  /** Some poll of the phase had both back in range. */
  bothIn: boolean;
  /** The offset written when the hot region first excluded the skewed one (the drift's detection point). */
  outAtOffsetMs: number | undefined;
  maxOffsetUs: number;
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
      logDir: join(dir, "logs"),
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

  it("steps forward and back and a drift: the exact bound holds, and the detector takes the pair out of lending and back", async () => {
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
        await sleep(5);
      }
      await Promise.all(inflight);
    };

    // Both daemons' view of each other, every 100 ms, into the current phase's record.
    let offsetMs = 0;
    let seen: Seen | undefined;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const cur = seen;
        const [h, s] = await Promise.all([
          clockOf(hot.gossipUrl, skewedId).catch(() => undefined),
          clockOf(skewed.gossipUrl, hotId).catch(() => undefined),
        ]);
        if (cur !== undefined && h !== undefined && s !== undefined) {
          if (h.excluded && !cur.hotOut) cur.outAtOffsetMs = offsetMs;
          cur.hotOut ||= h.excluded;
          cur.skewedOut ||= s.excluded;
          cur.bothIn ||= !h.excluded && !s.excluded;
          cur.maxOffsetUs = Math.max(cur.maxOffsetUs, Math.abs(h.offsetUs ?? 0));
        }
        await sleep(100);
      }
    })();

    // Loans the skewed region granted or renewed so far.
    const grantedBy = async () => {
      const [g, r] = await Promise.all(
        ["granted", "renewed"].map((e) =>
          metricOf(skewed.gossipUrl, "geoquota_gossip_loans_total", `event="${e}"`),
        ),
      );
      return (g ?? 0) + (r ?? 0);
    };
    const traffic = Promise.all([drive(hot.url, HOT_PER_SECOND), drive(skewed.url, 2)]);
    const record: Array<{ phase: Phase; seen: Seen; grantedAfter: number }> = [];
    let grantedBefore = 0;
    try {
      // Start: both in range (no sample at all excludes), then the hot region borrows.
      const startBy = Date.now() + 30_000;
      while ((await clockOf(hot.gossipUrl, skewedId))?.excluded !== false) {
        if (Date.now() > startBy) throw new Error("the clocks never agreed at start (30 s)");
        await sleep(100);
      }
      await sleep(4000);
      grantedBefore = await grantedBy();
      for (const phase of SCHEDULE) {
        seen = { hotOut: false, skewedOut: false, bothIn: false, outAtOffsetMs: undefined, maxOffsetUs: 0 };
        const step = phase.driftMsPer200;
        if (step === undefined) {
          offsetMs = phase.offsetMs;
          writeFileSync(offsetFile, `+${(offsetMs / 1000).toFixed(3)}s\n`);
        } else {
          for (offsetMs = step; offsetMs <= phase.offsetMs; offsetMs += step) {
            writeFileSync(offsetFile, `+${(offsetMs / 1000).toFixed(3)}s\n`);
            await sleep(200);
          }
          offsetMs = phase.offsetMs;
        }
        await sleep(phase.holdMs);
        record.push({ phase, seen, grantedAfter: await grantedBy() });
      }
    } finally {
      driving = false;
      watching = false;
      writeFileSync(offsetFile, "+0s\n");
      await Promise.all([traffic, watcher]);
    }

    // The exact oracle over the whole run, first: with the detector off it is what fails.
    const verdict = checkGlobalBound(samples, limit);
    const admitted = samples.filter((s) => s.cost > 0).length;
    expect(
      verdict.ok,
      `admitted ${admitted} of ${samples.length}; worst interval ${JSON.stringify(verdict.worstInterval)}`,
    ).toBe(true);

    // Not vacuous: the hot region borrowed before the faults, and again after each step back.
    expect(
      grantedBefore,
      "loans granted or renewed by the skewed region before the first step",
    ).toBeGreaterThan(0);
    const lines = record.map(
      (r) =>
        `${r.phase.label}: hot excluded the skewed region ${r.seen.hotOut}, skewed excluded hot ${r.seen.skewedOut}, both in range ${r.seen.bothIn}, max |offset| ${Math.round(r.seen.maxOffsetUs / 1000)} ms, loans granted or renewed so far ${r.grantedAfter}`,
    );
    const why = lines.join("\n");
    for (const [i, r] of record.entries()) {
      if (r.phase.out) {
        // Each fault over 2ε takes the pair out of lending, on both sides.
        expect(r.seen.hotOut && r.seen.skewedOut, why).toBe(true);
        expect(r.seen.maxOffsetUs, why).toBeGreaterThan(1_000_000);
      } else {
        // Back in range after each step back, and lending again.
        expect(r.seen.bothIn, why).toBe(true);
        expect(r.grantedAfter, why).toBeGreaterThan(record[i - 1]?.grantedAfter ?? 0);
      }
    }
    // The drift is caught before the offset matters (2ε; the check fires at ½·2ε plus what a round lags).
    const drift = record.find((r) => r.phase.driftMsPer200 !== undefined);
    expect(drift?.seen.outAtOffsetMs, why).toBeDefined();
    expect(drift?.seen.outAtOffsetMs ?? Number.POSITIVE_INFINITY, why).toBeLessThanOrEqual(TWO_EPS_MS);

    // The detector fired where an operator sees it: the counter (three faults, three
    // exclusions at least), the offset gauge, and the log line.
    const exclusions = await metricOf(hot.gossipUrl, "geoquota_clock_exclusions_total", `peer="${skewedId}"`);
    expect(exclusions ?? 0, why).toBeGreaterThanOrEqual(3);
    expect(
      await metricOf(hot.gossipUrl, "geoquota_clock_offset_seconds", `peer="${skewedId}"`),
    ).toBeDefined();
    const log = readFileSync(join(dir, "logs", `${hotId}-gossip.log`), "utf8");
    expect(log).toContain("clock_peer_excluded");
    expect(log).toContain("clock_peer_resumed");
  }, 240_000);
});
