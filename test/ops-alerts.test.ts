// ops/alerts.yml and ops/grafana-dashboard.json against the real processes:
// promtool validates the rules and runs their unit tests (ops/alerts.test.yml),
// and every metric an alert or a panel queries is one a running limiter or
// gossip daemon exports (read from their /metrics, HELP/TYPE lines included);
// `promtool check metrics` passes on those real scrapes, and no metric carries
// a label a scrape target's labels would overwrite (`region`, `instance`, `job`).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPolicies, loadRegionConfig } from "@geoquota/config";
import { startGossip } from "@geoquota/gossip";
import { startRegionService } from "@geoquota/limiter";
import { type RedisServer, startRedis } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("..", import.meta.url));
const ops = join(root, "ops");

/** Metric names a query refers to (ours and prom-client's process metrics). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:geoquota|process|nodejs)_[a-z0-9_]+\b/g)].map((m) => m[0]);
}

/** Sample names a /metrics text can carry: every `# TYPE` name, histograms with their series suffixes. */
function exportedNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    out.add(name);
    if (type === "histogram") for (const s of ["_bucket", "_sum", "_count"]) out.add(name + s);
    if (type === "summary") for (const s of ["_sum", "_count"]) out.add(name + s);
  }
  return out;
}

// Installed by scripts/bootstrap.sh (Debian package prometheus).
const promtool = "promtool";

describe("ops/alerts.yml", () => {
  it("promtool check rules passes", () => {
    const out = execFileSync(promtool, ["check", "rules", join(ops, "alerts.yml")], { encoding: "utf8" });
    expect(out).toContain("SUCCESS: 11 rules found");
  });

  it("promtool test rules passes (link down, breaker open, rollout stuck, policy unknown, shadow would-deny, clock offset excluded)", () => {
    const out = execFileSync(promtool, ["test", "rules", join(ops, "alerts.test.yml")], { encoding: "utf8" });
    expect(out).toContain("SUCCESS");
  });

  it("covers breaker open, link down, replication lag, bad frames, recovery stuck, overshoot margin, rollout, shadow, clock offset", () => {
    const rules = (
      parse(readFileSync(join(ops, "alerts.yml"), "utf8")) as {
        groups: { rules: { alert: string; expr: string }[] }[];
      }
    ).groups.flatMap((g) => g.rules);
    const byName = new Map(rules.map((r) => [r.alert, r.expr]));
    const uses: [string, string][] = [
      ["GeoquotaBreakerOpen", "geoquota_breaker_state"],
      ["GeoquotaGossipLinkDown", "geoquota_transport_link_up"],
      ["GeoquotaReplicationLagHigh", "geoquota_gossip_replication_lag_seconds"],
      ["GeoquotaBadFrames", "geoquota_gossip_bad_frames_total"],
      ["GeoquotaRecoveryStuck", "geoquota_region_recovering"],
      ["GeoquotaOvershootMarginUsed", "geoquota_decisions_total"],
      ["GeoquotaRolloutStuck", "geoquota_policy_completed_version"],
      ["GeoquotaPolicyUnknown", "geoquota_policy_phase"],
      ["GeoquotaShadowWouldDeny", "geoquota_shadow_decisions_total"],
      ["GeoquotaClockOffsetExcluded", "geoquota_clock_peer_excluded"],
    ];
    for (const [alert, metric] of uses) expect(byName.get(alert)).toContain(metric);
  });
});

describe("every metric the alerts and the dashboard query is exported", () => {
  let redis: RedisServer;
  let dir = "";
  const exported = new Set<string>();
  /** The raw scrapes, by process. */
  const scrapes = new Map<"limiter" | "daemon", string>();
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "gq-ops-"));
    const file = join(dir, "solo.json");
    writeFileSync(
      file,
      JSON.stringify({
        region: "solo",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: redis.url },
        // Port 0: bound, not picked beforehand (no peer needs to know it).
        regions: [{ id: "solo", gossip: "127.0.0.1:0" }],
        gossip: { listen: { host: "127.0.0.1", port: 0 }, plaintext: true },
        // Replicated policies (one region still rolls out): the daemon exports the rollout gauges.
        policy: { replicated: true },
        sharedSecret: "ops-test-shared-secret",
        adminToken: "ops-test-admin-token-0",
        policiesFile: join(root, "regions/policies.json"),
      }),
    );
    const config = loadRegionConfig(file, {});
    const limiter = await startRegionService({
      config,
      policies: loadPolicies(config.policiesPath, ["solo"]),
      port: 0,
    });
    closers.push(() => limiter.close());
    const daemon = await startGossip(config);
    closers.push(() => daemon.close());
    // Some decisions first, so the labelled series exist in the scrape (an explicit tenant and an unnamed one).
    for (const tenant of ["cust_ent_9942", "walk_in", "walk_in", "walk_in"]) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const r = await fetch(`${limiter.url}/v1/check`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ tenant, resource: "payments_checkout" }),
        });
        // Replicated: the limiter decides nothing before it has read the daemon's snapshot.
        const body = (await r.json()) as { reason?: string };
        if (body.reason !== "policy_unknown") break;
        if (Date.now() > deadline) throw new Error("the limiter never learnt its policies");
        await new Promise((res) => setTimeout(res, 200));
      }
    }
    for (const [name, url] of [
      ["limiter", `${limiter.url}/metrics`],
      ["daemon", `http://127.0.0.1:${daemon.httpPort}/metrics`],
    ] as const) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      const text = await res.text();
      scrapes.set(name, text);
      for (const n of exportedNames(text)) exported.add(n);
    }
  });

  afterAll(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(["limiter", "daemon"] as const)("promtool check metrics passes on the %s's scrape", (name) => {
    const text = scrapes.get(name)!;
    expect(text).toContain("geoquota_");
    // promtool exits non-zero and names the metric on any lint problem (e.g. a gauge named `_total`).
    const out = execFileSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
    expect(out).toBe("");
  });

  it.each(["limiter", "daemon"] as const)("no label of the %s collides with a target label", (name) => {
    const labels = new Set<string>();
    for (const m of scrapes.get(name)!.matchAll(/^[a-zA-Z_:][\w:]*\{([^}]*)\}/gm))
      for (const l of m[1]!.matchAll(/(\w+)="/g)) labels.add(l[1]!);
    expect(labels.size).toBeGreaterThan(3);
    for (const target of ["region", "instance", "job"]) expect(labels.has(target), target).toBe(false);
  });

  it("the per-key-class decisions are in the limiter's scrape, unnamed tenants folded into default", () => {
    // (A fresh replicated region starts in recovery at its floor share: these decisions are denials.)
    const text = scrapes.get("limiter")!;
    expect(text).toMatch(
      /^geoquota_key_decisions_total\{key_class="cust_ent_9942",resource="payments_checkout",result="\w+"\} \d/m,
    );
    expect(text).toMatch(
      /^geoquota_key_decisions_total\{key_class="default",resource="payments_checkout",result="\w+"\} \d/m,
    );
    expect(text).not.toContain("walk_in");
  });

  it("alerts.yml", () => {
    const rules = (
      parse(readFileSync(join(ops, "alerts.yml"), "utf8")) as {
        groups: { rules: { expr: string }[] }[];
      }
    ).groups.flatMap((g) => g.rules);
    const used = rules.flatMap((r) => metricNames(r.expr));
    expect(used.length).toBeGreaterThan(0);
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });

  it("grafana-dashboard.json", () => {
    const dash = JSON.parse(readFileSync(join(ops, "grafana-dashboard.json"), "utf8")) as {
      panels: { targets?: { expr: string }[] }[];
      templating: { list: { definition?: string }[] };
    };
    const exprs = [
      ...dash.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
      ...dash.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])),
    ];
    const used = exprs.flatMap(metricNames);
    expect(new Set(used).size).toBeGreaterThan(20);
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });
});
