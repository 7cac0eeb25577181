import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";

/**
 * Asks the kernel for a free TCP port on a loopback address. The port is
 * released before returning, so a racing process could take it: never hand
 * it to another process to bind later (use port 0 and read the real port
 * back, or `bindRetrying`). Kept for a test that needs a port nobody serves.
 */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("freePort: no port assigned"));
      });
    });
  });
}

/**
 * The kernel's ephemeral range (ports it gives to port-0 binds and to
 * outgoing connections), from /proc; Linux's default where unreadable.
 */
export function ephemeralRange(): { low: number; high: number } {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low! <= high!) return { low: low!, high: high! };
  } catch {
    // not Linux: the default below
  }
  return { low: 32768, high: 60999 };
}

/**
 * A random candidate port for a server that cannot bind port 0 (redis-server,
 * a Toxiproxy proxy that must keep its port across disable/enable), below the
 * ephemeral range when there is room: there no outgoing connection can take
 * it, only another explicit bind, and the caller retries on that (`bindRetrying`).
 */
export function candidatePort(random: () => number = Math.random): number {
  const { low, high } = ephemeralRange();
  const [from, to] = low - 1 >= 12_000 ? [10_000, low - 1] : [Math.max(1024, high + 1), 65_535];
  if (from > to) return 10_000 + Math.floor(random() * 20_000);
  return from + Math.floor(random() * (to - from + 1));
}

/** An error that says the port was taken (the caller retries with another). */
export class PortTakenError extends Error {
  constructor(
    readonly port: number,
    detail: string,
  ) {
    super(`port ${port} taken: ${detail}`);
    this.name = "PortTakenError";
  }
}

/**
 * Starts something on a candidate port, and on PortTakenError on another,
 * up to `attempts` times: for servers that cannot bind port 0. Any other
 * error ends the attempts at once (a bad flag is not a port race).
 */
export async function bindRetrying<T>(
  what: string,
  start: (port: number) => Promise<T>,
  attempts = 20,
  pick: () => number = candidatePort,
): Promise<T> {
  let last: PortTakenError | undefined;
  for (let i = 0; i < attempts; i++) {
    try {
      return await start(pick());
    } catch (err) {
      if (!(err instanceof PortTakenError)) throw err;
      last = err;
    }
  }
  throw new Error(`${what}: ${attempts} ports tried, all taken (last: ${last?.message})`);
}

/**
 * The TCP ports process `pid` listens on (IPv4 and IPv6), from /proc: its
 * socket inodes matched against the LISTEN rows of its network namespace.
 * Undefined where /proc is not readable (not Linux). Tells a server that
 * bound port 0 (Toxiproxy) where it is, and proves a port is served by the
 * process we started rather than by whoever took it first.
 */
export function listeningPorts(pid: number): number[] | undefined {
  let inodes: Set<string>;
  try {
    inodes = new Set(
      readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          return m ? [m[1]!] : [];
        } catch {
          return []; // closed meanwhile
        }
      }),
    );
  } catch {
    return undefined;
  }
  const ports = new Set<number>();
  for (const table of ["tcp", "tcp6"]) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is f[1] ("0100007F:1F90"), st is f[3] (0A = LISTEN), inode is f[9].
      if (f.length < 10 || f[3] !== "0A" || !inodes.has(f[9]!)) continue;
      ports.add(Number.parseInt(f[1]!.split(":")[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/** True when `host` is a loopback address: the only targets tests may use. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
