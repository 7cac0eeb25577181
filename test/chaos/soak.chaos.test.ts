// The soak in the test command: 3 minutes (GQ_SOAK_MS) of random faults from
// the whole catalogue under shifting load on one real 3-region cluster, the
// exact oracle over the whole run, resources flat after warm-up (soak.ts).
// GQ_SOAK_SEED replays a seed. The control runs the same soak with one fault
// the oracle is not told about (C and r raised tenfold behind its back): the
// soak must report the violation, or a passing soak would prove nothing.
// Reports go to .tmp/soak-test/ and .tmp/soak-control/ (no console output:
// the hygiene setup fails it).
import { join } from "node:path";
import { repoRoot } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { runSoak } from "../../packages/cli/src/chaos/soak.js";
import { startCluster } from "../../packages/cli/src/cluster/orchestrator.js";

const SEED = Number(process.env.GQ_SOAK_SEED ?? 26_005);
const SOAK_MS = Number(process.env.GQ_SOAK_MS ?? 180_000);
// Clock steps are in (the bootstrap builds .bin/redis-server-libc for libfaketime): with them,
// Σ shares is not checked in the windows after each step (checks.ts `clockStepWindows`), and a
// loss counts from its injection (`convergenceAfter`), which is what ended this seed in
// "convergence never" before (a Redis restarted empty more than 10 s after its kill).
const lines: string[] = [];
const write = (s: string) => void lines.push(s);

describe("chaos soak", () => {
  it(
    `holds the bound exactly with flat resources (seed ${SEED}, ${SOAK_MS / 1000} s)`,
    async () => {
      const { exitCode, report } = await runSoak({
        seed: SEED,
        durationMs: SOAK_MS,
        reportDir: join(repoRoot, ".tmp", "soak-test"),
        write,
        startCluster,
      });
      const why = `${lines.join("")}\nreplay: GQ_SOAK_SEED=${SEED} GQ_SOAK_MS=${SOAK_MS}`;
      expect(report.failures, why).toEqual([]);
      expect(exitCode).toBe(0);
      expect(report.scenario.bound.ok).toBe(true);
      // Not vacuous: faults of several kinds ran, the load moved, and every process was measured.
      const kinds = new Set(report.scenario.faults.map((f) => f.kind));
      expect(kinds.size, why).toBeGreaterThanOrEqual(5);
      expect(report.phases.length).toBeGreaterThanOrEqual(3);
      // The whole catalogue, clock steps included, and Σ shares checked outside their windows.
      expect(report.skipped).toEqual([]);
      if (SEED === 26_005) expect(kinds.has("clock-step"), why).toBe(true);
      expect(report.scenario.shares.groupsChecked).toBeGreaterThan(report.scenario.shares.groupsExcluded);
      expect(report.resources.verdicts.length).toBe(3 * 3 * 2 + 2 + 3); // (redis, limiter, gossip) × rss, sockets per region; toxiproxy; used_memory
    },
    // The soak, the cluster's start on a loaded machine, the O(n²) oracle and the convergence wait.
    SOAK_MS + 300_000,
  );

  it("flags a limit raised behind the oracle's back (the control)", async () => {
    const { exitCode, report } = await runSoak({
      seed: SEED,
      durationMs: 60_000,
      reportDir: join(repoRoot, ".tmp", "soak-control"),
      write,
      startCluster,
      unsafe: true,
    });
    expect(exitCode).toBe(1);
    // The raise did take effect (else the control proves nothing).
    expect(
      report.failures.filter((f) => f.includes("UNSAFE")),
      lines.join(""),
    ).toEqual([]);
    expect(report.scenario.bound.ok).toBe(false);
    expect(
      report.failures.some((f) => f.startsWith("global bound VIOLATED")),
      lines.join(""),
    ).toBe(true);
  }, 300_000);
});
