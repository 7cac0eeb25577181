// There is no Docker engine on the machines this is built on, so the compose
// file is kept honest by reading it: every service's command must be a real
// CLI command with a config file that exists and validates, and the ports,
// hosts and proxies in the compose file must match those config files.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildProgram, dialPairs, ROLE_NODE_FLAGS } from "@geoquota/cli";
import { loadPolicies, loadRegionConfig } from "@geoquota/config";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("..", import.meta.url));
const compose = parse(readFileSync(`${root}/docker-compose.yml`, "utf8"), { merge: true }) as {
  services: Record<
    string,
    {
      command?: string[];
      entrypoint?: string[];
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
      // Each role with the node flags the local cluster gives it (its young generation's size).
      expect(gossip!.entrypoint).toEqual(["node", ...ROLE_NODE_FLAGS.gossip, "bin/geoquota.mjs"]);
      expect(limiter!.entrypoint ?? ["node", ...ROLE_NODE_FLAGS.region, "bin/geoquota.mjs"]).toEqual([
        "node",
        ...ROLE_NODE_FLAGS.region,
        "bin/geoquota.mjs",
      ]);
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

  it("the image: multi-stage, Node LTS, built JS with production dependencies only, non-root, healthcheck", () => {
    const dockerfile = readFileSync(`${root}/Dockerfile`, "utf8");
    const stages = [...dockerfile.matchAll(/^FROM node:(\d+)-[\w-]+(?: AS (\w+))?$/gm)];
    expect(stages.length).toBe(2);
    for (const s of stages) expect(Number(s[1]) % 2 === 0 && Number(s[1]) >= 22).toBe(true); // LTS lines are even
    const runtime = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK /m);
    expect(runtime).toMatch(/ENTRYPOINT \["node", "bin\/geoquota\.mjs"\]/);
    expect(dockerfile).toContain("bash scripts/build.sh");
    expect(dockerfile).toContain("pnpm --filter @geoquota/cli deploy --prod /out");
    const pnpm = (JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as { packageManager: string })
      .packageManager;
    expect(dockerfile).toContain(pnpm);
    // The deployed CLI carries no TypeScript runner: its dependencies are runtime ones.
    const cli = JSON.parse(readFileSync(`${root}/packages/cli/package.json`, "utf8")) as {
      dependencies: Record<string, string>;
    };
    expect(Object.keys(cli.dependencies)).not.toContain("tsx");
    // Every command the compose file gives the image exists in the deployed layout.
    for (const [, svc] of Object.entries(compose.services)) {
      const cmd = (svc as { command?: string[] }).command;
      if (cmd && (cmd[0] === "region" || cmd[0] === "gossip")) expect(cmd[1]).toBe("--config");
    }
  });
});
