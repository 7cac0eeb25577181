// The daemon's target-share gauge (issue 22): its region label is `gq_region`
// (a scrape config's `region` target label would overwrite `region`), and a
// key no policy names any more loses its series at the next scrape.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createDaemonMetrics } from "../src/daemon/metrics.js";

describe("geoquota_gossip_target_share_ratio", () => {
  it("labels the region gq_region and drops a removed policy's keys at scrape time", async () => {
    const registry = new Registry();
    const named = new Set(["acme|api", "globex|api"]);
    const m = createDaemonMetrics(registry, { exportKey: (k) => named.has(k) });
    m.share.set({ key: "acme|api", region: "us-east" }, 500_000);
    m.share.set({ key: "globex|api", region: "eu-west" }, 250_000);
    m.share.set({ key: "stranger|api", region: "us-east" }, 1_000_000);
    let text = await registry.metrics();
    expect(text).toContain('geoquota_gossip_target_share_ratio{key="acme|api",gq_region="us-east"} 0.5');
    expect(text).toContain('geoquota_gossip_target_share_ratio{key="globex|api",gq_region="eu-west"} 0.25');
    expect(text).not.toContain("stranger");
    expect(text).not.toMatch(/target_share_ratio\{[^}]*\bregion=/);
    named.delete("acme|api");
    text = await registry.metrics();
    expect(text).not.toContain("acme|api");
    expect(text).toContain('key="globex|api"');
  });
});
