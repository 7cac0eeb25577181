import { type PolicySet, type PolicySpecInput, parsePolicySpec, withPolicy } from "@geoquota/config";
import { limiterApp } from "./app.js";
import { testConfig, testPolicies } from "./config.js";
import { FakeStore } from "./fake-store.js";

export function withPoliciesFor(tenant: string, resource: string, spec: PolicySpecInput): PolicySet {
  const r = parsePolicySpec(spec);
  if (!r.ok) throw new Error(r.issues.join("; "));
  return withPolicy(testPolicies(), tenant, resource, r.spec);
}

/**
 * An app in leased mode over a FakeStore: the config's defaults (batch 50, lowWater 10,
 * sized from the rate up to maxBatch 5000) unless `leased` says otherwise.
 */
export async function leasedApp(policies: PolicySet = testPolicies(), leased: Record<string, unknown> = {}) {
  const store = new FakeStore();
  const app = await limiterApp({
    store,
    config: testConfig({ leased: { enabled: true, ...leased } }),
    policies,
  });
  return { app, store };
}
