// Binding without a port race (src/listen.ts) on loopback: port 0 reports the port the kernel
// gave; a taken port fails loudly with EADDRINUSE unless `anyPortIfTaken`, and then binds
// another; only EADDRINUSE on a non-zero port falls back, once.
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bindWithFallback, isAddressInUse, listenServer } from "../src/index.js";

const HOST = "127.0.0.1";
const servers: Server[] = [];

function server(): Server {
  const s = createServer();
  servers.push(s);
  return s;
}

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((s) => new Promise<void>((done) => (s.listening ? s.close(() => done()) : done()))),
  );
});

function addressInUse(): NodeJS.ErrnoException {
  return Object.assign(new Error("listen EADDRINUSE"), { code: "EADDRINUSE" });
}

describe("listenServer", () => {
  it("port 0 binds loopback and resolves with the port the kernel picked", async () => {
    const s = server();
    const port = await listenServer(s, HOST, 0);
    expect(port).toBeGreaterThan(0);
    expect(s.address()).toMatchObject({ address: HOST, port });
    expect(s.listenerCount("error")).toBe(0);
  });

  it("a taken port fails with EADDRINUSE; with anyPortIfTaken it binds another port", async () => {
    const taken = await listenServer(server(), HOST, 0);
    const err = await listenServer(server(), HOST, taken).catch((e: unknown) => e);
    expect(isAddressInUse(err)).toBe(true);
    const s = server();
    const port = await listenServer(s, HOST, taken, { anyPortIfTaken: true });
    expect(port).not.toBe(taken);
    expect(s.address()).toMatchObject({ address: HOST, port });
  });
});

describe("bindWithFallback", () => {
  it("retries once on port 0 after EADDRINUSE, and only then", async () => {
    const asked: number[] = [];
    const bind = async (p: number) => {
      asked.push(p);
      if (p !== 0) throw addressInUse();
      return "bound";
    };
    expect(await bindWithFallback(4000, bind, { anyPortIfTaken: true })).toBe("bound");
    expect(asked).toEqual([4000, 0]);
    await expect(bindWithFallback(4000, bind)).rejects.toThrow("EADDRINUSE");
    const other = Object.assign(new Error("listen EACCES"), { code: "EACCES" });
    await expect(bindWithFallback(80, () => Promise.reject(other), { anyPortIfTaken: true })).rejects.toBe(
      other,
    );
    const zero: number[] = [];
    await expect(
      bindWithFallback(
        0,
        (p) => {
          zero.push(p);
          return Promise.reject(addressInUse());
        },
        { anyPortIfTaken: true },
      ),
    ).rejects.toThrow("EADDRINUSE");
    expect(zero).toEqual([0]);
  });
});
