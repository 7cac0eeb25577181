import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

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

let setprivPath: string | null | undefined;

/**
 * util-linux's `setpriv`, when this is Linux and it is on PATH. The exit hooks
 * above cannot run when this process is SIGKILLed (a vitest worker killed on a
 * timeout, `kill -9` of `geoquota cluster`); a child started through
 * `setpriv --pdeathsig KILL` gets SIGKILL from the kernel when its parent
 * dies, however it dies. setpriv execs the command, so the pid is the child's.
 */
function setpriv(): string | null {
  if (setprivPath !== undefined) return setprivPath;
  setprivPath = null;
  if (process.platform !== "linux") return setprivPath;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, "setpriv");
    try {
      accessSync(candidate, constants.X_OK);
      setprivPath = candidate;
      break;
    } catch {
      // not here
    }
  }
  return setprivPath;
}

/**
 * The command line and environment that start `command` with a parent-death
 * signal, or the command as it is where setpriv is missing. A preloaded
 * library (libfaketime for the clock-fault tests) is for the server, not for
 * setpriv: it moves onto an `env` exec'd last, so only the server loads it.
 */
function withParentDeathSignal(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): { command: string; args: string[]; env: Record<string, string | undefined> } {
  const merged: Record<string, string | undefined> = { ...process.env, ...env };
  const wrapper = setpriv();
  if (wrapper === null) return { command, args: [...args], env: merged };
  const preload = merged.LD_PRELOAD;
  if (preload === undefined) {
    return { command: wrapper, args: ["--pdeathsig", "KILL", "--", command, ...args], env: merged };
  }
  delete merged.LD_PRELOAD;
  return {
    command: wrapper,
    args: ["--pdeathsig", "KILL", "--", "env", `LD_PRELOAD=${preload}`, command, ...args],
    env: merged,
  };
}

/** Spawns a long-running server process and tracks it for cleanup. */
export function spawnManaged(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  options: SpawnOptions = {},
): ManagedProcess {
  installHooks();
  const run = withParentDeathSignal(command, args, env);
  const child = spawn(run.command, run.args, {
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
    env: run.env,
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
