// `geoquota policy get | diff | apply | set | status` as a black box (the
// built CLI) against a real 2-region cluster, and the gossip daemon's SIGHUP
// reload of the policies file, observed through the admin HTTP API of the
// other region (docs/design.md §3.4).
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Cluster, startCluster } from "@geoquota/cli";
import { runCli } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const seed = fileURLToPath(new URL("./fixtures/policies-rollout.json", import.meta.url));
const TOKEN = "local-cluster-admin";

/** `geoquota policy <args…>` through the built CLI (the test kit's runner). */
const cli = (args: string[], env: Record<string, string> = {}) => runCli(["policy", ...args], env);

interface VersionId {
  version: number;
  origin: string;
  digest: string;
}

describe("geoquota policy against a real cluster", () => {
  let cluster: Cluster;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gq-policy-cli-"));
    const policiesFile = join(dir, "policies.json");
    copyFileSync(seed, policiesFile);
    cluster = await startCluster({
      regions: 2,
      policiesFile,
      configOverrides: { lease: { epsilonMs: 100, loanDurationMs: 1500 } },
    });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const url = () => ["--url", cluster.regions[0]!.url, "--token", TOKEN];
  const file = (name: string, doc: unknown) => {
    const p = join(dir, name);
    writeFileSync(p, JSON.stringify(doc));
    return p;
  };
  const seedDoc = () => JSON.parse(readFileSync(seed, "utf8")) as { policies: Record<string, unknown>[] };

  it("get, diff, apply, status --wait, set; a bad file is refused whole naming the field", async () => {
    const get = await cli(["get", ...url()]);
    expect(get.code, get.err).toBe(0);
    expect(get.out).toMatch(/^# v0@seed#[0-9a-f]{32} \(stable\)/);
    expect(JSON.parse(get.out.slice(get.out.indexOf("\n") + 1))).toEqual(seedDoc());

    const next = seedDoc();
    next.policies[0] = { ...next.policies[0], capacity: 50 };
    const nextFile = file("next.json", next);
    const diff = await cli(["diff", nextFile, "--exit-code", ...url()]);
    expect(diff.code).toBe(1);
    expect(diff.out).toBe(
      '~ policies[rollout_tenant/api] {"algorithm":"token_bucket","capacity":30,"refillPerSecond":15} -> {"algorithm":"token_bucket","capacity":50,"refillPerSecond":15}\n',
    );

    const bad = seedDoc();
    bad.policies[0] = { ...bad.policies[0], capacity: -3 };
    const refused = await cli(["apply", file("bad.json", bad), ...url()]);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/policies\[0\]\.capacity/);

    const apply = await cli(["apply", nextFile, "--json", ...url()]);
    expect(apply.code, apply.err).toBe(0);
    const target = (JSON.parse(apply.out) as { state: { target: VersionId } }).state.target;
    expect(target.version).toBe(1);

    // Any region answers for the cluster: status through the other region, with its config file.
    // Asked for the applied version: without --version, the other region's own
    // target may still be the older one when it is asked.
    const applied = `v${target.version}@${target.origin}#${target.digest}`;
    const status = await cli([
      "status",
      "--wait",
      "30s",
      "--version",
      applied,
      "--config",
      cluster.regions[1]!.configPath,
    ]);
    expect(status.code, status.out + status.err).toBe(0);
    expect(status.out).toContain(
      `target v1@${target.origin}#${target.digest.slice(0, 8)}, completed here v1@${target.origin}#${target.digest.slice(0, 8)}, phase stable`,
    );

    const same = await cli(["apply", nextFile, ...url()]);
    expect(same.out).toMatch(/^no change/);
    expect((await cli(["diff", nextFile, "--exit-code", ...url()])).out).toBe("no changes\n");

    // The token may come from the environment; the region must still be named.
    const set = await cli(["set", "cust_new", "api", '{"capacity":7,"refillPerSecond":1}'], {
      GEOQUOTA_ADMIN_TOKEN: TOKEN,
    });
    expect(set.code).toBe(2);
    expect(set.err).toMatch(/--url/);
    const set2 = await cli(["set", "cust_new", "api", '{"capacity":7,"refillPerSecond":1}', ...url()]);
    expect(set2.code, set2.err).toBe(0);
    expect(set2.out).toMatch(/^proposed v2@/);
    const after = await cli(["status", "--wait", "30s", "--json", ...url()]);
    expect(after.code, after.out).toBe(0);
    expect(JSON.parse(after.out).target.version).toBe(2);
    // Issue 22: `status --wait` through another region, right after the change was
    // proposed: it waits for that version, not for the asked region's own target.
    const set3 = await cli(["set", "cust_wait", "api", '{"capacity":8,"refillPerSecond":1}', ...url()]);
    expect(set3.code, set3.err).toBe(0);
    const proposed = /--version (v\d+@\S+#[0-9a-f]{32})/.exec(set3.out)?.[1];
    expect(proposed, set3.out).toBeDefined();
    const waited = await cli([
      "status",
      "--wait",
      "30s",
      "--version",
      proposed!,
      "--json",
      "--config",
      cluster.regions[1]!.configPath,
    ]);
    expect(waited.code, waited.out + waited.err).toBe(0);
    const ws = JSON.parse(waited.out) as { completed: VersionId; regions: { acked: VersionId }[] };
    const want = Number(/^v(\d+)@/.exec(proposed!)?.[1]);
    expect(ws.completed.version).toBeGreaterThanOrEqual(want);
    for (const r of ws.regions) expect(r.acked.version).toBeGreaterThanOrEqual(want);
    // `set --wait` waits for its own version and says whether its edit held.
    const set4 = await cli([
      "set",
      "cust_wait",
      "api",
      '{"capacity":9,"refillPerSecond":1}',
      "--wait",
      "30s",
      ...url(),
    ]);
    expect(set4.code, set4.out + set4.err).toBe(0);
    expect(set4.out).toMatch(/arrived in every region/);
    const badVersion = await cli(["status", "--wait", "1s", "--version", "v3", ...url()]);
    expect(badVersion.code).toBe(2);
    expect(badVersion.err).toMatch(/--version: expected a version like/);

    const shown = await cli(["get", "--json", ...url()]);
    expect(JSON.parse(shown.out).policies.policies).toContainEqual({
      tenant: "cust_new",
      resource: "api",
      capacity: 7,
      refillPerSecond: 1,
    });

    // `policy delete` through another region: the entry is gone in every region's
    // document once the version arrived; deleting it again names the missing entry.
    const other = ["--config", cluster.regions[1]!.configPath];
    const del = await cli(["delete", "cust_wait", "api", "--wait", "30s", ...other]);
    expect(del.code, del.out + del.err).toBe(0);
    expect(del.out).toMatch(/arrived in every region/);
    for (const r of cluster.regions) {
      const doc = (await fetch(`${r.url}/v1/policy`, { headers: { authorization: `Bearer ${TOKEN}` } }).then(
        (x) => x.json(),
      )) as { policies: { policies: { tenant: string; resource: string }[] } };
      expect(doc.policies.policies.some((e) => e.tenant === "cust_wait" && e.resource === "api")).toBe(false);
      expect(doc.policies.policies.some((e) => e.tenant === "cust_new" && e.resource === "api")).toBe(true);
    }
    const again = await cli(["delete", "cust_wait", "api", ...other]);
    expect(again.code, again.out + again.err).not.toBe(0);
    expect(again.err).toMatch(/404 no policy entry cust_wait\/api/);

    // A whole document always carries its base (the server answers 428 without
    // one): `--base` naming a version the cluster moved past is refused 412,
    // and the file's entries would not have undone the edits made since.
    const stale = await cli(["apply", nextFile, "--base", applied, ...url()]);
    expect(stale.code, stale.out + stale.err).toBe(1);
    expect(stale.err).toMatch(/412 If-Match: the document was based on v1@/);
    const raw = await fetch(`${cluster.regions[0]!.url}/v1/policy`, {
      method: "PUT",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(next),
    });
    expect(raw.status).toBe(428);
    // Without --base, apply is based on the version it reads first (sent as If-Match).
    const fresh = (JSON.parse((await cli(["get", "--json", ...url()])).out) as { policies: typeof next })
      .policies;
    fresh.policies.push({ tenant: "cust_applied", resource: "api", capacity: 4, refillPerSecond: 1 });
    const based = await cli(["apply", file("fresh.json", fresh), "--wait", "30s", ...url()]);
    expect(based.code, based.out + based.err).toBe(0);
  }, 150_000);

  it("SIGHUP makes a gossip daemon propose its edited policies file; every region rolls it out", async () => {
    const before = (await await fetch(`${cluster.regions[1]!.url}/v1/policy`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    }).then((r) => r.json())) as { target: VersionId };
    const edited = seedDoc();
    edited.policies.push({ tenant: "cust_hup", resource: "api", capacity: 9, refillPerSecond: 3 });
    writeFileSync(cluster.policiesPath, JSON.stringify(edited));
    const pid = cluster.regions[0]!.gossip.child.pid;
    expect(pid).toBeTypeOf("number");
    process.kill(pid as number, "SIGHUP");
    const deadline = Date.now() + 30_000;
    let seen: { target: VersionId; phase: string; policies: { policies: unknown[] } } | undefined;
    while (Date.now() < deadline) {
      const res = await fetch(`${cluster.regions[1]!.url}/v1/policy`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      seen = (await res.json()) as typeof seen;
      if (seen && seen.target.version > before.target.version && seen.phase === "stable") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen?.target.version).toBe(before.target.version + 1);
    expect(seen?.policies).toEqual(edited);
    // A bad file on SIGHUP is refused whole: no new version.
    writeFileSync(cluster.policiesPath, '{"default": {"capacity": "many"}}');
    process.kill(pid as number, "SIGHUP");
    await new Promise((r) => setTimeout(r, 2000));
    const still = (await fetch(`${cluster.regions[1]!.url}/v1/policy`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    }).then((r) => r.json())) as { target: VersionId };
    expect(still.target).toEqual(seen?.target);
  }, 60_000);
});
