// Compose runs gossip over mutual TLS: every region config sets gossip.tls to
// files under the directory the daemons mount, and the certificates
// ops/gossip-certs.sh makes name every host a dialer uses for the peer (the
// Toxiproxy service in between, or the daemon's own service).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadRegionConfig } from "@geoquota/config";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("..", import.meta.url));
const ids = ["us-east", "eu-west", "ap-south"];
const env = { GEOQUOTA_SHARED_SECRET: "s".repeat(32), GEOQUOTA_ADMIN_TOKEN: "t".repeat(32) };
const compose = parse(readFileSync(`${root}/docker-compose.yml`, "utf8"), { merge: true }) as {
  services: Record<string, { volumes?: string[] }>;
};
const dir = mkdtempSync(join(tmpdir(), "gq-compose-tls-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("compose gossip TLS", () => {
  it("every daemon has TLS on, with its files in the mounted certificate directory", () => {
    for (const id of ids) {
      const c = loadRegionConfig(`${root}/regions/docker/${id}.json`, env);
      expect(c.gossip.plaintext).toBe(false);
      const tls = c.gossip.tls!;
      expect(tls).toEqual({
        cert: `/etc/geoquota/tls/${id}.crt`,
        key: `/etc/geoquota/tls/${id}.key`,
        ca: "/etc/geoquota/tls/ca.crt",
      });
      const mounts = compose.services[`gossip-${id}`]?.volumes ?? [];
      expect(mounts).toContain(`./certs/gossip:${dirname(tls.cert)}:ro`);
    }
  });

  it("ops/gossip-certs.sh makes certificates the dialers accept for every compose link", () => {
    const out = join(dir, "certs");
    execFileSync("bash", [join(root, "ops/gossip-certs.sh"), out, ...ids], { stdio: "ignore" });
    const sans = new Map<string, string>();
    for (const id of ids) {
      execFileSync("openssl", ["verify", "-CAfile", join(out, "ca.crt"), join(out, `${id}.crt`)], {
        stdio: "ignore",
      });
      const text = execFileSync(
        "openssl",
        ["x509", "-in", join(out, `${id}.crt`), "-noout", "-ext", "subjectAltName"],
        {
          encoding: "utf8",
        },
      );
      sans.set(id, text);
    }
    for (const dialer of ids) {
      const c = loadRegionConfig(`${root}/regions/docker/${dialer}.json`, env);
      for (const peer of c.regions) {
        if (peer.id === dialer) continue;
        const host = peer.gossip.slice(0, peer.gossip.lastIndexOf(":"));
        expect(sans.get(peer.id)).toContain(`DNS:${host}`);
      }
    }
  });
});
