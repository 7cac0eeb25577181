// Readiness and real addresses as a message instead of polling and pre-picked
// ports: the orchestrator starts each limiter and gossip process with an IPC
// channel and GQ_READY_IPC=1; the process binds its listeners (port 0, or the
// port it had, or another when that one is taken: no port is ever chosen for
// it beforehand, so none can be taken in between), then sends one message
// naming the addresses it got. The orchestrator still confirms with one
// /readyz or /healthz request, so the JSON line means what it meant.
//
// Messages (plain objects, Node's IPC serialization):
//   child → orchestrator  { type: "geoquota:ready", listeners: { <name>: "host:port" } }
//   orchestrator → daemon { type: "geoquota:peers", peers: { <region>: "host:port" } }
// A process that receives nothing after ready (the limiter) closes the channel;
// a gossip daemon keeps it (unreferenced) for peers' addresses, which it learns
// only once they have bound, and again when a restarted peer moved.
// Any new listener is one more name in `listeners` (the limiter's RLS gRPC port: `rls`).
import type { ManagedProcess } from "@geoquota/procs";

export const READY_IPC_ENV = "GQ_READY_IPC";
const READY = "geoquota:ready";
const PEERS = "geoquota:peers";

/** `name → host:port` of every listener a process bound. */
export type Listeners = Readonly<Record<string, string>>;

/** True in a process the orchestrator started (it reads the reported addresses). */
export function startedByOrchestrator(): boolean {
  return process.env[READY_IPC_ENV] === "1" && process.send !== undefined;
}

/** `host:port` for a bound listener (IPv6 hosts in brackets, as URLs and configs write them). */
export function endpoint(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * In a process started by the orchestrator: tell it we serve, and where.
 * `keepChannel` keeps the IPC channel open (unreferenced: it never keeps the
 * process alive) for later messages (onPeers). Elsewhere: nothing.
 */
export function reportReady(listeners: Listeners, options: { keepChannel?: boolean } = {}): void {
  if (!startedByOrchestrator()) return;
  process.send?.({ type: READY, listeners }, () => {
    if (options.keepChannel !== true) process.disconnect?.();
  });
}

/** In a daemon started by the orchestrator: `handler` gets each peers message. Call before reportReady. */
export function onPeers(handler: (peers: Listeners) => void): void {
  if (!startedByOrchestrator()) return;
  process.on("message", (m: unknown) => {
    const msg = m as { type?: unknown; peers?: unknown } | null;
    if (msg?.type !== PEERS || typeof msg.peers !== "object" || msg.peers === null) return;
    handler(msg.peers as Listeners);
  });
  // A 'message' listener references the channel; the daemon's own life is its signals.
  (process.channel as { unref?: () => void } | undefined)?.unref?.();
}

/** Closes the IPC channel, if any (a daemon shutting down). */
export function closeChannel(): void {
  if (process.connected) process.disconnect?.();
}

/** Orchestrator side: hands `peers` (`region → host:port`) to a daemon that reported ready. */
export function sendPeers(proc: ManagedProcess, peers: Listeners): void {
  if (!proc.child.connected) return; // it exited: its restart reads the config file
  proc.child.send({ type: PEERS, peers });
}

function isReady(m: unknown): m is { type: string; listeners: Record<string, unknown> } {
  const msg = m as { type?: unknown; listeners?: unknown } | null;
  return msg?.type === READY && typeof msg.listeners === "object" && msg.listeners !== null;
}

/**
 * Resolves with the listeners `proc` reports; rejects when it exits first,
 * when a listener it must have is missing, or after `timeoutMs`.
 */
export function readySignal(
  proc: ManagedProcess,
  what: string,
  timeoutMs: number,
  required: readonly string[] = [],
): Promise<Listeners> {
  return new Promise((resolve, reject) => {
    const { child } = proc;
    const done = (err: Error | undefined, listeners?: Listeners) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      if (err) reject(err);
      else resolve(listeners ?? {});
    };
    const onMessage = (m: unknown) => {
      if (!isReady(m)) return;
      const listeners: Record<string, string> = {};
      for (const [name, v] of Object.entries(m.listeners)) if (typeof v === "string") listeners[name] = v;
      const missing = required.filter((name) => listeners[name] === undefined);
      if (missing.length > 0) done(new Error(`${what}: reported ready without ${missing.join(", ")}`));
      else done(undefined, listeners);
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
