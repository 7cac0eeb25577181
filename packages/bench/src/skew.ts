// Section 5: utilization under skew on a real local 3-region cluster
// (redis-server, limiter and gossip daemon per region, loopback). Demand above
// the global rate goes mostly to one region; the admitted global rate ÷ r is
// measured first with re-weighting off (the static split: each region keeps
// its base third), then on (geoquota), then the hot spot moves and the
// reaction time to 90% of the new target is measured.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OpenLoop } from "./open-loop.js";
import type { Budget } from "./types.js";

export const SKEW_TENANT = "cust_ent_9942";
export const SKEW_RESOURCE = "payments_checkout";
/** The bench's policy for the tenant: C = 200, r = 200/s (the shipped 1000/60 s would need minutes per figure). */
export const SKEW_LIMIT = { capacity: 200, refillPerSecond: 200 } as const;
/** Total demand, × r. */
const DEMAND_FACTOR = 1.5;
const FLOOR = 0.02;
const REACTION_WINDOW_MS = 500;
const REACTION_STEP_MS = 50;

export interface SkewCluster {
  readonly regions: readonly { readonly id: string; readonly url: string; readonly configPath: string }[];
  restartGossip(id: string): Promise<void>;
  stop(): Promise<void>;
}

export type StartCluster = (o: {
  regions: number;
  policiesFile: string;
  configOverrides: Record<string, unknown>;
}) => Promise<SkewCluster>;

export interface SkewPhase {
  readonly mode: "static" | "geoquota";
  /** Demand split in percent per region, e.g. "100/0/0". */
  readonly split: string;
  readonly measuredMs: number;
  readonly admittedPerSecond: number;
  /** admitted ÷ r. */
  readonly utilization: number;
}

export interface SkewResult {
  readonly limit: { readonly capacity: number; readonly refillPerSecond: number };
  readonly demandPerSecond: number;
  readonly phases: SkewPhase[];
  /** geoquota ÷ static, per split. */
  readonly gainOverStatic: Record<string, number>;
  /** ms from the hot spot moving to the new hot region's trailing 500 ms rate reaching 90% of its target. */
  readonly reactionMs: number;
  readonly reactionReached: boolean;
  readonly reactionTargetPerSecond: number;
  readonly errors: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function writePolicies(dir: string): string {
  const file = join(dir, "policies-bench.json");
  const spec = {
    algorithm: "token_bucket",
    capacity: SKEW_LIMIT.capacity,
    refillPerSecond: SKEW_LIMIT.refillPerSecond,
  };
  writeFileSync(
    file,
    JSON.stringify({
      default: { algorithm: "token_bucket", capacity: 5, refill: { tokens: 5, perSeconds: 60 } },
      policies: [{ tenant: SKEW_TENANT, resource: SKEW_RESOURCE, ...spec }],
    }),
  );
  return file;
}

/** Turns re-weighting on in every region's config and restarts the daemons on it. */
async function enableReweighting(cluster: SkewCluster): Promise<void> {
  for (const r of cluster.regions) {
    const cfg = JSON.parse(readFileSync(r.configPath, "utf8")) as { gossip: Record<string, unknown> };
    cfg.gossip.reweighting = true;
    writeFileSync(r.configPath, `${JSON.stringify(cfg, null, 2)}\n`);
  }
  await Promise.all(cluster.regions.map((r) => cluster.restartGossip(r.id)));
}

export async function benchSkew(startCluster: StartCluster, budget: Budget): Promise<SkewResult> {
  const r = SKEW_LIMIT.refillPerSecond;
  const demand = DEMAND_FACTOR * r;
  const warmStaticMs = budget.smoke ? 1000 : 2000;
  const warmGeoMs = budget.smoke ? 2500 : 5000;
  const measureMs = budget.smoke ? 1000 : 8000;
  const reactionMaxMs = budget.smoke ? 4000 : 10_000;
  const dir = mkdtempSync(join(tmpdir(), "geoquota-bench-"));
  const cluster = await startCluster({
    regions: 3,
    policiesFile: writePolicies(dir),
    configOverrides: { gossip: { reweighting: false } },
  });
  const load = new OpenLoop(
    cluster.regions.map((x) => x.url),
    SKEW_TENANT,
    SKEW_RESOURCE,
  );
  const phases: SkewPhase[] = [];
  const phase = async (mode: SkewPhase["mode"], split: number[], warmMs: number) => {
    load.setRates(split.map((p) => (p / 100) * demand));
    await sleep(warmMs);
    const from = load.now();
    await sleep(measureMs);
    const to = load.now();
    const admittedPerSecond = load.admitted(from, to) / ((to - from) / 1000);
    phases.push({
      mode,
      split: split.join("/"),
      measuredMs: to - from,
      admittedPerSecond,
      utilization: admittedPerSecond / r,
    });
  };
  let reactionMs = reactionMaxMs;
  let reached = false;
  const target = r * (1 - 2 * FLOOR);
  try {
    load.start();
    await phase("static", [100, 0, 0], warmStaticMs);
    await phase("static", [90, 5, 5], warmStaticMs);
    load.setRates([0, 0, 0]);
    await enableReweighting(cluster);
    await phase("geoquota", [100, 0, 0], warmGeoMs);
    await phase("geoquota", [90, 5, 5], warmStaticMs);
    // The hot spot moves to region 2; its trailing rate is sampled every 50 ms.
    load.setRates([0, demand, 0]);
    const shiftAt = load.now();
    while (load.now() - shiftAt < reactionMaxMs) {
      await sleep(REACTION_STEP_MS);
      const t = load.now();
      if (t - shiftAt < REACTION_WINDOW_MS) continue;
      const rate = load.admitted(t - REACTION_WINDOW_MS, t, 1) / (REACTION_WINDOW_MS / 1000);
      if (rate >= 0.9 * target) {
        reactionMs = t - shiftAt;
        reached = true;
        break;
      }
    }
  } finally {
    await load.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const gainOverStatic: Record<string, number> = {};
  for (const g of phases.filter((p) => p.mode === "geoquota")) {
    const s = phases.find((p) => p.mode === "static" && p.split === g.split);
    if (s && s.utilization > 0) gainOverStatic[g.split] = g.utilization / s.utilization;
  }
  return {
    limit: SKEW_LIMIT,
    demandPerSecond: demand,
    phases,
    gainOverStatic,
    reactionMs,
    reactionReached: reached,
    reactionTargetPerSecond: target,
    errors: load.errors,
  };
}
