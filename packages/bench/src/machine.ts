// The machine a run was measured on, recorded with the figures.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Redis } from "ioredis";

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly node: string;
  readonly redis: string;
  readonly loadAverage: string;
}

export async function describeMachine(redis: Redis): Promise<Machine> {
  let cpuModel = "unknown";
  let load = "unknown";
  try {
    cpuModel = /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? cpuModel;
    load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    // Not Linux: the figures still stand, the description is thinner.
  }
  const info = await redis.info("server");
  return {
    nproc: availableParallelism(),
    cpuModel,
    node: process.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown",
    loadAverage: load,
  };
}
