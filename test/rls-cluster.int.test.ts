// Issue 23 point 4 on real processes: a 3-region cluster (3 redis-server, 3 limiters
// serving RLS v3, 3 gossip daemons, every gossip link behind a real Toxiproxy), driven
// only through .bin/rls-client — Envoy's generated Go types over grpc-go, a client
// nobody here wrote. Each line it prints carries the wall-clock instants the request
// was sent and answered, so the exact oracle (the sim's checkGlobalBound: Σ admitted
// over every interval ≤ C + r·T) reads the client's own record.
//
// Exactness needs slices with whole tokens: the bound policies weigh the regions
// 1/2, 1/4, 1/4 of C = 40 (20, 10, 10 tokens), and the client sends in the same
// proportion (an address listed twice gets twice the requests), so every region
// runs dry at the same request: the 40th OK is the last, the 41st is OVER_LIMIT
// everywhere.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Cluster, startCluster } from "@geoquota/cli";
import { type Admission, checkGlobalBound, repoRoot } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const policiesFile = fileURLToPath(new URL("./fixtures/policies-rls.json", import.meta.url));

interface Status {
  code: string;
  remaining: number;
  limit?: number;
  unit?: string;
}
interface Line {
  i: number;
  addr: string;
  sentUs: number;
  answeredUs: number;
  overall?: string;
  statuses?: Status[];
  err?: string;
  errMsg?: string;
}

/** .bin/rls-client with `args` against `addrs` (round-robin, repeats weigh), one parsed line per request. */
async function client(addrs: readonly string[], args: readonly string[]): Promise<Line[]> {
  const { stdout } = await run(
    join(repoRoot, ".bin/rls-client"),
    ["-addr", addrs.join(","), "-domain", "geoquota", ...args],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  return stdout
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Line);
}

/** What the oracle counts: an OK is one admission of `cost`, from send to answer (ms). */
function admissions(lines: readonly Line[], cost = 1): Admission[] {
  return lines.map((l) => ({
    sentMs: l.sentUs / 1000,
    answeredMs: l.answeredUs / 1000,
    cost: l.overall === "OK" ? cost : 0,
  }));
}

const okBy = (lines: readonly Line[], addr: string) =>
  lines.filter((l) => l.addr === addr && l.overall === "OK").length;

let cluster: Cluster;
let east: string;
let west: string;
let south: string;

beforeAll(async () => {
  cluster = await startCluster({ regions: 3, policiesFile, toxiproxy: true, rls: true });
  [east, west, south] = cluster.regions.map((r) => r.rls!) as [string, string, string];
}, 180_000);

afterAll(async () => {
  await cluster?.stop();
});

describe("geoquota's RLS on a 3-region cluster, through Envoy's generated Go client", () => {
  it("OVER_LIMIT exactly when the global bound is reached across the three regions", async () => {
    // 80 requests, half to us-east, a quarter to each other region: C = 40, refill 40/day.
    const lines = await client(
      [east, west, east, south],
      ["-d", "tenant=rls_bound,resource=api", "-n", "80"],
    );
    expect(lines.filter((l) => l.err !== undefined)).toEqual([]);
    const codes = lines.map((l) => l.overall);
    // Every request up to the global capacity is admitted, every one after it denied.
    expect(codes.slice(0, 40)).toEqual(Array(40).fill("OK"));
    expect(codes.slice(40)).toEqual(Array(40).fill("OVER_LIMIT"));
    expect([okBy(lines, east), okBy(lines, west), okBy(lines, south)]).toEqual([20, 10, 10]);
    // Every matched status carries current_limit (Envoy sends no X-RateLimit-* without it):
    // the policy's sustained rate, 40/day, in the smallest unit holding a whole request.
    for (const l of lines) expect(l.statuses).toMatchObject([{ limit: 1, unit: "HOUR" }]);
    const v = checkGlobalBound(admissions(lines), { capacity: 40, refillPerSecond: 40 / 86_400 });
    expect(v.ok, JSON.stringify(v.worstInterval)).toBe(true);
    expect(v.admitted).toBe(40);
  }, 60_000);

  it("per-descriptor hits_addend: 5 charged per request, 0 only checked, across the regions", async () => {
    const lines = await client(
      [east, west, east, south],
      ["-d", "tenant=rls_hits,resource=api;hits=5", "-d", "tenant=rls_hits,resource=peek;hits=0", "-n", "16"],
    );
    expect(lines.filter((l) => l.err !== undefined)).toEqual([]);
    // 40 / 5 = 8 requests fit the global capacity (slices 20, 10, 10: 4, 2, 2 of them).
    expect(lines.map((l) => l.overall)).toEqual([...Array(8).fill("OK"), ...Array(8).fill("OVER_LIMIT")]);
    expect(
      checkGlobalBound(admissions(lines, 5), { capacity: 40, refillPerSecond: 40 / 86_400 }),
    ).toMatchObject({
      ok: true,
      admitted: 40,
    });
    // The check-only descriptor counted nothing: each region still holds its whole slice of it.
    const slice = new Map([
      [east, 20],
      [west, 10],
      [south, 10],
    ]);
    for (const l of lines) {
      expect(l.statuses![1]).toMatchObject({ code: "OK", remaining: slice.get(l.addr), limit: 1 });
    }
  }, 60_000);

  it("a descriptor's limit override is a global limit of its own", async () => {
    // Equal weights: each region's slice of 30 is 30·s/U with s ≈ U/3, a hair under 10
    // tokens (shares are whole ppm), and a fixed window does not refill within its day:
    // a region admits the whole tokens it holds. So at most 30 and at least 30 − 3.
    const v = `o${process.pid}`;
    const lines = await client([east, west, south], ["-d", `tenant=${v};limit=30/DAY`, "-n", "60"]);
    expect(lines.filter((l) => l.err !== undefined)).toEqual([]);
    for (const l of lines) expect(l.statuses).toMatchObject([{ limit: 30, unit: "DAY" }]);
    const ok = lines.filter((l) => l.overall === "OK").length;
    expect(ok).toBeLessThanOrEqual(30);
    expect(ok).toBeGreaterThanOrEqual(27);
    // Once denied, denied in every region (the window lasts the day).
    const firstOver = lines.findIndex((l) => l.overall === "OVER_LIMIT");
    expect(lines.slice(firstOver + 3).every((l) => l.overall === "OVER_LIMIT")).toBe(true);
    for (const a of [east, west, south]) expect(okBy(lines, a)).toBeGreaterThan(0);
    // The override is its own counter: the policies file's default for this tenant is untouched.
    const other = await client([east], ["-d", `tenant=${v},resource=api`]);
    expect(other[0]).toMatchObject({ overall: "OK" });
  }, 60_000);

  it("the exact oracle holds under a partition on real Toxiproxy (the hot region cut off)", async () => {
    // C = 20, r = 20/s, equal base shares. us-east is hot (flat out); the others trickle,
    // so quota may be lent to us-east; then every gossip link of us-east is cut for 4 s (it
    // keeps serving from what it safely holds), healed, and driven 2 s more.
    const limit = { capacity: 20, refillPerSecond: 20 };
    const d = ["-d", "tenant=rls_part,resource=api"];
    const phase = (ms: number) =>
      Promise.all([
        client([east], [...d, "-for", `${ms}ms`]),
        client([west], [...d, "-for", `${ms}ms`, "-interval", "200ms"]),
        client([south], [...d, "-for", `${ms}ms`, "-interval", "200ms"]),
      ]).then((ls) => ls.flat());
    const before = await phase(3000);
    await cluster.setGossipLinks("us-east", false);
    let during: Line[];
    try {
      during = await phase(4000);
    } finally {
      await cluster.setGossipLinks("us-east", true);
    }
    const after = await phase(2000);
    const all = [...before, ...during, ...after];
    expect(all.filter((l) => l.err !== undefined)).toEqual([]);
    const v = checkGlobalBound(admissions(all), limit);
    expect(v.ok, `worst interval ${JSON.stringify(v.worstInterval)}`).toBe(true);
    // Not vacuous: the bound was pressed (the hot region was denied), and a cut-off
    // region keeps serving what it holds (G4), as do the others.
    expect(all.some((l) => l.addr === east && l.overall === "OVER_LIMIT")).toBe(true);
    expect(v.admitted).toBeGreaterThan(limit.capacity);
    expect(okBy(during, east)).toBeGreaterThan(0);
    expect(okBy(during, west) + okBy(during, south)).toBeGreaterThan(0);
  }, 120_000);
});
