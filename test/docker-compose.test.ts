// There is no Docker engine on the machines this is built on, so the compose
// file is kept honest by reading it: every service's command must be a real
// CLI command with a config file that exists and validates, and the ports,
// hosts and proxies in the compose file must match those config files.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildProgram, dialPairs } from "@geoquota/cli";
import { loadPolicies, loadRegionConfig } from "@geoquota/config";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("..", import.meta.url));
const compose = parse(readFileSync(`${root}/docker-compose.yml`, "utf8"), { merge: true }) as {
  services: Record<
    string,
    {
      command?: string[];
      ports?: string[];
      image?: string;
      build?: string;
      volumes?: string[];
      healthcheck?: unknown;
    }
  >;
};
const ids = ["us-east", "eu-west", "ap-south"];
const env = { GEOQUOTA_SHARED_SECRET: "s".repeat(32), GEOQUOTA_ADMIN_TOKEN: "t".repeat(32) };
const proxies = JSON.parse(readFileSync(`${root}/regions/docker/toxiproxy.json`, "utf8")) as Array<{
  name: string;
  listen: string;
  upstream: string;
}>;

describe("docker-compose.yml agrees with the CLI and regions/docker", () => {
  const commands = new Set(buildProgram().commands.map((c) => c.name()));

  for (const id of ids) {
    it(`region ${id}: limiter and daemon run real commands on a valid config`, () => {
      const configPath = `regions/docker/${id}.json`;
      const config = loadRegionConfig(`${root}/${configPath}`, env);
      expect(config.region).toBe(id);
      loadPolicies(config.policiesPath, ids);

      const limiter = compose.services[`limiter-${id}`];
      const gossip = compose.services[`gossip-${id}`];
      const redis = compose.services[`redis-${id}`];
      expect(limiter && gossip && redis).toBeTruthy();
      expect(limiter!.command).toEqual(["region", "--config", configPath]);
      expect(gossip!.command).toEqual(["gossip", "--config", configPath]);
      expect(commands.has("region") && commands.has("gossip")).toBe(true);
      expect(limiter!.healthcheck).toBeTruthy();
      expect(gossip!.healthcheck).toBeTruthy();

      // Container ports are the ones the config listens on.
      expect(limiter!.ports?.[0]?.endsWith(`:${config.listen.port}`)).toBe(true);
      expect(gossip!.ports?.[0]?.endsWith(`:${config.gossip.http?.port}`)).toBe(true);
      expect(config.redis.url).toBe(`redis://redis-${id}:6379`);
      expect(config.listen.host).toBe("0.0.0.0");
      expect(config.gossip.listen.host).toBe("0.0.0.0");

      // Every link this region dials goes through a Toxiproxy proxy to the peer's daemon.
      for (const [dialer, acceptor] of dialPairs(ids)) {
        if (dialer !== id) continue;
        const target = config.regions.find((r) => r.id === acceptor)!.gossip;
        const port = target.split(":")[1];
        const proxy = proxies.find((p) => p.listen.endsWith(`:${port}`));
        expect(target.startsWith("toxiproxy:")).toBe(true);
        expect(proxy?.name).toBe(`gossip_${dialer}_${acceptor}`);
        expect(proxy?.upstream).toBe(
          `gossip-${acceptor}:${loadRegionConfig(`${root}/regions/docker/${acceptor}.json`, env).gossip.listen.port}`,
        );
      }
    });
  }

  it("secrets come from the environment, never from the file", () => {
    for (const id of ids) {
      const raw = JSON.parse(readFileSync(`${root}/regions/docker/${id}.json`, "utf8")) as Record<
        string,
        unknown
      >;
      expect(raw.sharedSecret).toEqual({ env: "GEOQUOTA_SHARED_SECRET" });
      expect(raw.adminToken).toEqual({ env: "GEOQUOTA_ADMIN_TOKEN" });
    }
  });

  it("Toxiproxy loads the proxies file and every published port is distinct", () => {
    const toxi = compose.services.toxiproxy!;
    expect(toxi.volumes?.some((v) => v.startsWith("./regions/docker/toxiproxy.json:"))).toBe(true);
    const published = Object.values(compose.services).flatMap((s) =>
      (s.ports ?? []).map((p) => p.split(":")[0]),
    );
    expect(new Set(published).size).toBe(published.length);
  });

  it("the image runs the CLI entry point the repo ships", () => {
    const dockerfile = readFileSync(`${root}/Dockerfile`, "utf8");
    expect(dockerfile).toMatch(/ENTRYPOINT \["node", "packages\/cli\/bin\/geoquota\.mjs"\]/);
    const pnpm = (JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as { packageManager: string })
      .packageManager;
    expect(dockerfile).toContain(`npm install -g ${pnpm}`);
  });
});
