// examples/nginx/nginx.conf, run by Debian's real nginx (auth_request against a
// limiter on a real Redis, in front of a tiny app): admitted requests reach the
// app, exactly C of them; the rest are 429 with Retry-After and the RateLimit
// fields; and when the limiter is gone the configured fail mode holds — 503 by
// default, the app for the fail-open variant. The example file itself is what
// runs, with only its three addresses and the fail mode replaced.
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parsePolicies, parseRegionConfig } from "@geoquota/config";
import { type RegionService, startRegionService } from "@geoquota/limiter";
import {
  bindRetrying,
  candidatePort,
  findBinary,
  listeningPorts,
  type ManagedProcess,
  PortTakenError,
  type RedisServer,
  repoRoot,
  spawnManaged,
  startRedis,
} from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const EXAMPLE = join(repoRoot, "examples/nginx/nginx.conf");
/** The global capacity; refill negligible over the test, so admissions are counted exactly. */
const C = 5;
/** nobody:nogroup: a root test run starts nginx as this user (nginx must not run as root here). */
const NOBODY = 65534;

interface Nginx {
  readonly url: string;
  readonly dir: string;
  readonly process: ManagedProcess;
  errorLog(): string;
  stop(): Promise<void>;
}

/** Replaces a line of the example that must be there exactly once (a drifted example fails loudly). */
function substitute(text: string, from: string, to: string): string {
  const n = text.split(from).length - 1;
  if (n !== 1) throw new Error(`examples/nginx/nginx.conf: expected "${from}" once, found it ${n} times`);
  return text.replace(from, to);
}

const startTimeoutMs = 30_000;

/**
 * nginx cannot bind port 0 and report it: it is given a candidate port and,
 * when that is taken (it exits with "Address already in use"), another one.
 * Ready once the process we started listens on the port (/proc), so a server
 * that took the port first is never mistaken for ours.
 */
async function startNginx(o: {
  limiter: string;
  app: string;
  failMode: "closed" | "open";
  /** Where candidate ports come from (default candidatePort); the retry's test passes a taken one first. */
  pickPort?: () => number;
}): Promise<Nginx> {
  const example = readFileSync(EXAMPLE, "utf8");
  const binary = findBinary("nginx");
  const asRoot = process.getuid?.() === 0;
  return await bindRetrying(
    "nginx",
    async (port) => {
      const dir = mkdtempSync(join(tmpdir(), "gq-nginx-"));
      let conf = substitute(example, "server 127.0.0.1:8080;", `server ${o.limiter};`);
      conf = substitute(conf, "server 127.0.0.1:3000;", `server ${o.app};`);
      conf = substitute(conf, "listen 127.0.0.1:8088;", `listen 127.0.0.1:${port};`);
      conf = substitute(conf, "set $geoquota_fail_mode closed;", `set $geoquota_fail_mode ${o.failMode};`);
      writeFileSync(join(dir, "nginx.conf"), conf);
      // The prefix (pid, logs, temp paths) is the user's own directory.
      if (asRoot) chownSync(dir, NOBODY, NOBODY);
      const proc = spawnManaged(
        binary,
        ["-p", dir, "-c", "nginx.conf"],
        {},
        asRoot ? { uid: NOBODY, gid: NOBODY } : {},
      );
      const errorLog = () => {
        const f = join(dir, "error.log");
        return existsSync(f) ? readFileSync(f, "utf8") : "";
      };
      const stop = async () => {
        await proc.stop(5000);
        rmSync(dir, { recursive: true, force: true });
      };
      const exited = () => proc.child.exitCode !== null || proc.child.signalCode !== null;
      const deadline = Date.now() + startTimeoutMs;
      for (;;) {
        if (exited()) {
          const why = `${proc.output()}\n${errorLog()}`.trim();
          await stop();
          if (/Address already in use/i.test(why)) throw new PortTakenError(port, why.split("\n")[0] ?? "");
          throw new Error(`nginx exited: ${why}`);
        }
        if (listeningPorts(proc.pid)?.includes(port)) break;
        if (Date.now() > deadline) {
          const why = `${proc.output()}\n${errorLog()}`.trim();
          await stop();
          throw new Error(`nginx did not listen on ${port} within ${startTimeoutMs} ms: ${why}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      return { url: `http://127.0.0.1:${port}`, dir, process: proc, errorLog, stop };
    },
    20,
    o.pickPort,
  );
}

/** The app behind nginx: answers 200 and records which tenant reached it. */
function startApp(): Promise<{ server: Server; url: string; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${String(req.headers["x-tenant-id"])} ${req.url}`);
    res.writeHead(200, { "content-type": "text/plain" }).end("from the app\n");
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const a = server.address() as AddressInfo;
      resolve({ server, url: `127.0.0.1:${a.port}`, hits });
    });
  });
}

let redis: RedisServer | undefined;
let limiter: RegionService | undefined;
let app: Awaited<ReturnType<typeof startApp>> | undefined;
let closed: Nginx | undefined;
let open: Nginx | undefined;

beforeAll(async () => {
  redis = await startRedis();
  const regionsDir = join(repoRoot, "regions");
  const config = parseRegionConfig(
    {
      region: "solo",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: redis.url, timeoutMs: 500 },
      regions: [{ id: "solo", gossip: "127.0.0.1:1" }],
      gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
    },
    { file: "nginx-test-region.json", baseDir: regionsDir, env: {} },
  );
  const policies = parsePolicies(
    { default: { capacity: C, refillPerSecond: 0.0001 }, deny: [{ tenant: "abuser" }] },
    "nginx-test-policies.json",
    ["solo"],
  );
  limiter = await startRegionService({ config, policies, redis: redis.url, fresh: true, port: 0 });
  app = await startApp();
  const limiterAddr = limiter.url.replace(/^http:\/\//, "");
  closed = await startNginx({ limiter: limiterAddr, app: app.url, failMode: "closed" });
  open = await startNginx({ limiter: limiterAddr, app: app.url, failMode: "open" });
});

afterAll(async () => {
  // Each step runs even when an earlier one (or the test) failed.
  await Promise.allSettled([closed?.stop(), open?.stop()]);
  await limiter?.close().catch(() => {});
  await new Promise((r) => (app ? app.server.close(r) : r(undefined)));
  await redis?.stop();
});

const get = (n: Nginx, path: string, headers: Record<string, string> = {}) =>
  fetch(`${n.url}${path}`, { headers });

const hitsOf = (tenant: string) => app!.hits.filter((h) => h.startsWith(`${tenant} `)).length;

describe("examples/nginx/nginx.conf with Debian's nginx", () => {
  it("exactly C requests reach the app (200 with the RateLimit fields); the rest are 429 with Retry-After", async () => {
    const tenant = `t${process.pid}a`;
    const responses = [];
    for (let i = 0; i < C + 3; i++)
      responses.push(await get(closed!, "/api/orders/1", { "x-tenant-id": tenant }));
    const statuses = responses.map((r) => r.status);
    expect(statuses, closed!.errorLog()).toEqual([...Array(C).fill(200), 429, 429, 429]);
    expect(hitsOf(tenant)).toBe(C);
    // The admitted ones: the app's body, the region's remaining C−1 … 0 in RateLimit.
    for (let i = 0; i < C; i++) {
      const r = responses[i]!;
      expect(await r.text()).toBe("from the app\n");
      expect(r.headers.get("ratelimit")).toMatch(new RegExp(`^"region";r=${C - 1 - i};t=\\d+`));
      expect(r.headers.get("ratelimit-policy")).toMatch(new RegExp(`^"global";q=${C};w=\\d+`));
      expect(r.headers.get("retry-after")).toBeNull();
    }
    for (const r of responses.slice(C)) {
      const retryAfter = r.headers.get("retry-after");
      expect(retryAfter).toMatch(/^[1-9]\d*$/);
      // On a denial the service limit's t is the Retry-After value (as the limiter sends it).
      expect(r.headers.get("ratelimit")).toMatch(new RegExp(`^"region";r=0;t=${retryAfter};pk=`));
      expect(r.headers.get("ratelimit-policy")).toMatch(new RegExp(`^"global";q=${C};`));
      expect(await r.text()).toBe("rate limit exceeded\n");
    }
  });

  it("keys by the tenant header and the path's resource; a client's own X-Geoquota-Cost is not passed", async () => {
    const tenant = `t${process.pid}b`;
    // Spend the key (tenant, "orders") while claiming a cost of 0 (check only, would count nothing).
    const statuses = [];
    for (let i = 0; i < C + 2; i++)
      statuses.push(
        (await get(closed!, "/api/orders/2", { "x-tenant-id": tenant, "x-geoquota-cost": "0" })).status,
      );
    expect(statuses).toEqual([...Array(C).fill(200), 429, 429]);
    // Another resource of the same tenant, and another tenant of the same resource: their own buckets.
    expect((await get(closed!, "/api/invoices", { "x-tenant-id": tenant })).status).toBe(200);
    expect((await get(closed!, "/api/orders/2", { "x-tenant-id": `${tenant}x` })).status).toBe(200);
  });

  it("no tenant: 400 naming the limiter's error; a deny-listed tenant: 403; neither reaches the app", async () => {
    const before = app!.hits.length;
    const missing = await get(closed!, "/api/orders/3");
    expect(missing.status).toBe(400);
    expect(missing.headers.get("x-geoquota-error")).toBe("GQ_ERR_INVALID_BODY");
    const denied = await get(closed!, "/api/orders/3", { "x-tenant-id": "abuser" });
    expect(denied.status).toBe(403);
    expect(denied.headers.get("retry-after")).toBeNull();
    expect(app!.hits.length).toBe(before);
  });

  it("the fail-open variant decides like the default while the limiter answers", async () => {
    const tenant = `t${process.pid}c`;
    const statuses = [];
    for (let i = 0; i < C + 1; i++)
      statuses.push((await get(open!, "/api/orders/4", { "x-tenant-id": tenant })).status);
    expect(statuses).toEqual([...Array(C).fill(200), 429]);
    expect(hitsOf(tenant)).toBe(C);
  });

  it("a port taken by someone else: nginx fails to bind it, and another port is tried", async () => {
    const squatter = createTcpServer();
    await new Promise<void>((r) => squatter.listen(0, "127.0.0.1", r));
    const taken = (squatter.address() as AddressInfo).port;
    const picks: number[] = [];
    const pickPort = () => {
      const p = picks.length === 0 ? taken : candidatePort();
      picks.push(p);
      return p;
    };
    let third: Nginx | undefined;
    try {
      third = await startNginx({
        limiter: limiter!.url.replace(/^http:\/\//, ""),
        app: app!.url,
        failMode: "closed",
        pickPort,
      });
      expect(picks[0]).toBe(taken);
      expect(third.url).not.toBe(`http://127.0.0.1:${taken}`);
      expect((await get(third, "/api/orders/6", { "x-tenant-id": `t${process.pid}e` })).status).toBe(200);
    } finally {
      await third?.stop();
      await new Promise((r) => squatter.close(r));
    }
  });

  // Last: it stops the limiter.
  it("limiter stopped: 503 and nothing reaches the app by default; the fail-open variant lets requests through", async () => {
    await limiter!.close();
    const tenant = `t${process.pid}d`;
    for (let i = 0; i < 3; i++) {
      const r = await get(closed!, "/api/orders/5", { "x-tenant-id": tenant });
      expect(r.status).toBe(503);
      expect(await r.text()).toBe("rate limiter unavailable\n");
    }
    expect(hitsOf(tenant)).toBe(0);
    for (let i = 0; i < 3; i++) {
      const r = await get(open!, "/api/orders/5", { "x-tenant-id": tenant });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-geoquota-fail-open")).toBe("true");
      expect(await r.text()).toBe("from the app\n");
    }
    expect(hitsOf(tenant)).toBe(3);
  });
});
