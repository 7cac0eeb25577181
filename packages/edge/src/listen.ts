// Binding a listener without a port race. A port chosen free and handed to a
// process that binds it later can be taken in between (another listener, or
// an outgoing connection's ephemeral port); so every listener geoquota starts
// for a local cluster or a test binds port 0 and reports the port it got, and
// a process restarted on its previous port takes another when that one is
// gone. A user's fixed port still fails loudly when taken (`anyPortIfTaken`
// off), because nobody would learn the new one.
import type { AddressInfo, Server } from "node:net";

export interface ListenOptions {
  /**
   * On EADDRINUSE for a non-zero port, bind a port the kernel picks instead
   * of failing. Only for a process whose starter reads the real address back.
   */
  readonly anyPortIfTaken?: boolean;
}

/** True for the error a bind to a taken port raises. */
export function isAddressInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === "EADDRINUSE";
}

/**
 * Runs `bind(port)`; when it fails with EADDRINUSE and `anyPortIfTaken` is
 * set, runs `bind(0)` once (port 0 cannot be taken). For listeners that are
 * not a bare net.Server (Fastify's `app.listen`, a gRPC server's bind).
 */
export async function bindWithFallback<T>(
  port: number,
  bind: (port: number) => Promise<T>,
  options: ListenOptions = {},
): Promise<T> {
  try {
    return await bind(port);
  } catch (err) {
    if (port === 0 || options.anyPortIfTaken !== true || !isAddressInUse(err)) throw err;
    return await bind(0);
  }
}

/** `server.listen(port, host)` as a promise (see bindWithFallback); resolves with the bound port. */
export async function listenServer(
  server: Server,
  host: string,
  port: number,
  options: ListenOptions = {},
): Promise<number> {
  await bindWithFallback(
    port,
    (p) =>
      new Promise<void>((resolve, reject) => {
        const onError = (err: Error) => reject(err);
        server.once("error", onError);
        server.listen(p, host, () => {
          server.off("error", onError);
          resolve();
        });
      }),
    options,
  );
  return (server.address() as AddressInfo).port;
}
