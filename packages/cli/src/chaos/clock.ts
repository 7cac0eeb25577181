// Clock steps for the soak (issue 26 point 5): each region's redis-server runs
// under libfaketime (the libc-malloc build scripts/bootstrap.sh puts in .bin/:
// Debian's jemalloc build aborts under it), its TIME offset read from a file
// per region, as test/clock-step.int.test.ts does. A `clock-step` fault
// rewrites the file (a step forward or back of more than 2ε), its heal steps
// back to +0. Without the binary or the library the soak skips the kind and
// says so.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, type StartRedisOptions } from "@geoquota/procs";
import type { Cluster, ClusterOptions } from "../cluster/orchestrator.js";

export const FAKETIME_REDIS =
  process.env.GQ_REDIS_FAKETIME_SERVER ?? join(repoRoot, ".bin", "redis-server-libc");
export const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/** Whether clock steps can run here: undefined if so, else why not. */
export function clockStepsUnavailable(): string | undefined {
  const missing = [FAKETIME_REDIS, LIBFAKETIME].filter((f) => !existsSync(f));
  return missing.length === 0
    ? undefined
    : `${missing.join(" and ")} missing (run scripts/bootstrap.sh; apt-get install faketime)`;
}

export interface ClockFiles {
  /** The redis options of every region (startCluster's `redis`). */
  readonly redis: NonNullable<ClusterOptions["redis"]>;
  /** Region id → its offset file. */
  readonly files: Readonly<Record<string, string>>;
  readonly dir: string;
  remove(): void;
}

/** One offset file per region (all at +0 s) and the redis options that read them. */
export function clockFiles(ids: readonly string[]): ClockFiles {
  const dir = mkdtempSync(join(tmpdir(), "gq-soak-clock-"));
  const files: Record<string, string> = {};
  const redis: NonNullable<ClusterOptions["redis"]> = {};
  for (const id of ids) {
    const file = join(dir, `${id}.offset`);
    writeFileSync(file, "+0s\n");
    files[id] = file;
    redis[id] = faketimeLaunch(file);
  }
  return { redis, files, dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

function faketimeLaunch(file: string): Pick<StartRedisOptions, "binary" | "env"> {
  return {
    binary: FAKETIME_REDIS,
    env: {
      LD_PRELOAD: LIBFAKETIME,
      FAKETIME_TIMESTAMP_FILE: file,
      // Re-read on every clock call (a step takes effect at once); Redis's
      // own timers keep the real monotonic clock.
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    },
  };
}

const registered = new WeakMap<Cluster, Readonly<Record<string, string>>>();

/** Makes `cluster`'s offset files known to the clock-step fault. */
export function registerClockFiles(cluster: Cluster, files: Readonly<Record<string, string>>): void {
  registered.set(cluster, files);
}

/** Sets `region`'s Redis clock `offsetMs` off real time (0: back in step). */
export function setClockOffset(cluster: Cluster, region: string, offsetMs: number): void {
  const file = registered.get(cluster)?.[region];
  if (file === undefined)
    throw new Error(`clock-step: ${region}'s redis-server does not run under libfaketime in this cluster`);
  const s = (offsetMs / 1000).toFixed(3);
  writeFileSync(file, `${offsetMs < 0 ? s : `+${s}`}s\n`);
}

/** The binary and environment `region`'s redis-server was started with (a replica must share its clock). */
export function redisLaunchOf(cluster: Cluster, region: string): Pick<StartRedisOptions, "binary" | "env"> {
  const file = registered.get(cluster)?.[region];
  return file === undefined ? {} : faketimeLaunch(file);
}
