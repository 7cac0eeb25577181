// Readiness as a signal instead of polling: the orchestrator starts each
// limiter and gossip process with an IPC channel and GQ_READY_IPC=1; the
// process sends one message once it serves (HTTP listening), then closes the
// channel. The orchestrator still confirms with one /readyz or /healthz
// request, so the JSON line means what it meant: every service answers.
import type { ManagedProcess } from "@geoquota/procs";

export const READY_IPC_ENV = "GQ_READY_IPC";
const READY = "geoquota:ready";

/** In a process started by the orchestrator: tell it we serve. Elsewhere: nothing. */
export function reportReady(): void {
  if (process.env[READY_IPC_ENV] !== "1" || process.send === undefined) return;
  process.send(READY, () => process.disconnect?.());
}

/** Resolves when `proc` reports ready; rejects when it exits first or after `timeoutMs`. */
export function readySignal(proc: ManagedProcess, what: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const { child } = proc;
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      if (err) reject(err);
      else resolve();
    };
    const onMessage = (m: unknown) => {
      if (m === READY) done();
    };
    const onExit = () => done(new Error(`${what}: process exited:\n${proc.output().slice(-2000)}`));
    const timer = setTimeout(
      () => done(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)),
      timeoutMs,
    );
    if (child.exitCode !== null || child.signalCode !== null) return onExit();
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}
