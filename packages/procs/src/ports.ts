import { createServer } from "node:net";

/**
 * Asks the kernel for a free TCP port on a loopback address. The port is
 * released before returning, so a racing process could take it; callers that
 * bind it themselves retry on EADDRINUSE (see `startRedis`).
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
 * `count` distinct free ports: every socket stays bound until all are picked,
 * so the kernel cannot hand the same port out twice (consecutive `freePort`
 * calls can get the port the previous one just released).
 */
export async function freePorts(count: number, host = "127.0.0.1"): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve, reject) => {
            server.once("error", reject);
            server.listen({ host, port: 0, exclusive: true }, () => {
              const address = server.address();
              if (address && typeof address === "object") resolve(address.port);
              else reject(new Error("freePorts: no port assigned"));
            });
          }),
      ),
    );
  } finally {
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve())),
      ),
    );
  }
}

/** True when `host` is a loopback address: the only targets tests may use. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
