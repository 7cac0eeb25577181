import { type ChildProcess, spawn } from "node:child_process";

/**
 * Every server process the harness starts is registered here, so that it is
 * stopped when the test that started it ends, when the process exits, and on
 * SIGINT/SIGTERM (Ctrl-C during a test run leaves no orphan redis-server).
 */
const live = new Set<ChildProcess>();
let hooksInstalled = false;

function killAllSync(): void {
  for (const child of live) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  live.clear();
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.once("exit", killAllSync);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = () => {
      // A program with its own handler (e.g. `geoquota cluster`) owns the
      // graceful shutdown; the exit hook still kills whatever it leaves.
      if (process.listenerCount(signal) > 1) return;
      process.removeListener(signal, onSignal);
      killAllSync();
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

export interface ManagedProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Output collected so far (bounded), for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves when the process exits, with its code or signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const outputBytesMax = 64 * 1024;

export interface SpawnOptions {
  /**
   * Open a Node IPC channel to the child (`child.on("message")`), for a node
   * process that reports its own readiness instead of being polled.
   */
  readonly ipc?: boolean;
  /** Run as this user and group (a root test run starting a server that must not run as root, e.g. nginx). */
  readonly uid?: number;
  readonly gid?: number;
}

/** Spawns a long-running server process and tracks it for cleanup. */
export function spawnManaged(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  options: SpawnOptions = {},
): ManagedProcess {
  installHooks();
  const child = spawn(command, [...args], {
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
    ...(options.uid !== undefined ? { uid: options.uid } : {}),
    ...(options.gid !== undefined ? { gid: options.gid } : {}),
  });
  let out = "";
  const collect = (chunk: Buffer) => {
    out += chunk.toString("utf8");
    if (out.length > outputBytesMax) out = out.slice(out.length - outputBytesMax);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  live.add(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
    child.once("error", (err) => {
      live.delete(child);
      out += `\nspawn error: ${err.message}`;
      resolve({ code: -1, signal: null });
    });
  });
  const stop = async (graceMs = 3000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  };
  return { child, pid: child.pid ?? -1, output: () => out, stop, exited };
}

/** The pids of processes started by the harness that are still running. */
export function livePids(): number[] {
  return [...live].map((c) => c.pid ?? -1).filter((p) => p > 0);
}

/** Stops every process still tracked; used by global teardown. */
export async function stopAll(): Promise<void> {
  await Promise.all(
    [...live].map(async (child) => {
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
    }),
  );
}
