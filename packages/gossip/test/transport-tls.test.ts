// wss with mutual certificate verification. Certificates are made per run with
// the openssl CLI (present on the dev and CI images); the test is skipped without it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@geoquota/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mesh, type PeerDownReason } from "../src/transport/index.js";

const SECRET = "test-secret-0123456789";
const HOST = "127.0.0.1";

function hasOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

let dir = "";
const ossl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });

/** A CA and one leaf certificate for 127.0.0.1 usable as server and client. */
function makePki(name: string): { keyPath: string; certPath: string; caPath: string } {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  ossl(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    `${name}-ca.key`,
    "-out",
    `${name}-ca.crt`,
    "-days",
    "1",
    "-subj",
    `/CN=${name}-ca`,
  );
  ossl("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
  writeFileSync(
    join(dir, `${name}.ext`),
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
  );
  ossl(
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${name}-ca.crt`,
    "-CAkey",
    `${name}-ca.key`,
    "-CAcreateserial",
    "-out",
    `${name}.crt`,
    "-days",
    "1",
    "-extfile",
    `${name}.ext`,
  );
  return {
    keyPath: join(dir, `${name}.key`),
    certPath: join(dir, `${name}.crt`),
    caPath: join(dir, `${name}-ca.crt`),
  };
}

const meshes: Mesh[] = [];
afterEach(async () => {
  await Promise.all(meshes.splice(0).map((m) => m.stop()));
});

// The certificates are made with openssl (scripts/bootstrap.sh installs it
// when missing); without it this tier fails rather than silently skipping.
describe("Mesh over TLS", () => {
  let good: ReturnType<typeof makePki>;
  let rogue: ReturnType<typeof makePki>;
  beforeAll(() => {
    if (!hasOpenssl()) throw new Error("openssl not found: run scripts/bootstrap.sh or install openssl");
    dir = mkdtempSync(join(tmpdir(), "gq-tls-"));
    good = makePki("good");
    rogue = makePki("rogue");
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function pair(bTls: typeof good) {
    const frames: string[] = [];
    const failures: PeerDownReason[] = [];
    const b = new Mesh(
      {
        self: "b",
        listen: { host: HOST, port: 0 },
        peers: [{ id: "a", url: "wss://127.0.0.1:1" }],
        secret: SECRET,
        tls: good,
      },
      {
        handlers: {
          onFrame: (_p, bytes) => frames.push(Buffer.from(bytes).toString()),
          onHandshakeFailure: (_p, reason) => failures.push(reason),
        },
      },
    );
    meshes.push(b);
    await b.start();
    const a = new Mesh({
      self: "a",
      listen: { host: HOST, port: 0 },
      peers: [{ id: "b", url: `wss://${HOST}:${b.port()}` }],
      secret: SECRET,
      tls: bTls,
      reconnect: { baseMs: 20, capMs: 100 },
    });
    meshes.push(a);
    await a.start();
    return { a, b, frames, failures };
  }

  it("connects with certificates from the shared CA and carries frames", async () => {
    const { a, b, frames } = await pair(good);
    await waitFor("up", () => a.isUp("b") && b.isUp("a"), 5000, 5);
    expect(a.send("b", new TextEncoder().encode("over tls"))).toBe(true);
    await waitFor("frame", () => frames.length === 1, 5000, 5);
    expect(frames).toEqual(["over tls"]);
  });

  it("refuses a peer whose certificate chain the other side does not trust", async () => {
    const { a, b, failures: bFailures } = await pair(rogue);
    await waitFor("both failed", () => a.peers()[0]!.lastError !== null && bFailures.length > 0, 5000, 5);
    expect(a.peers()[0]!.lastError, JSON.stringify(a.peers()[0]!.lastError)).toMatchObject({
      code: "GQ_ERR_TLS",
      closeCode: 1015,
      by: "local",
    });
    expect(a.peers()[0]!.lastError!.detail).toMatch(/certificate|self.signed|verify/i);
    expect(bFailures[0]).toMatchObject({ code: "GQ_ERR_TLS", by: "local" });
    expect(a.isUp("b")).toBe(false);
    expect(b.isUp("a")).toBe(false);
  });
});
