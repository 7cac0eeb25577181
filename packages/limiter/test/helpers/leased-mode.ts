import { type PolicySet, type PolicySpecInput, parsePolicySpec, withPolicy } from "@geoquota/config";
import { limiterApp } from "./app.js";
import { testConfig, testPolicies } from "./config.js";
import { FakeStore } from "./fake-store.js";

export function withPoliciesFor(tenant: string, resource: string, spec: PolicySpecInput): PolicySet {
  const r = parsePolicySpec(spec);
  if (!r.ok) throw new Error(r.issues.join("; "));
  return withPolicy(testPolicies(), tenant, resource, r.spec);
}

/** An app in leased mode over a FakeStore. */
export async function leasedApp(policies: PolicySet = testPolicies()) {
  const store = new FakeStore();
  const app = await limiterApp({
    store,
    config: testConfig({ leased: { enabled: true, batch: 50, lowWater: 10 } }),
    policies,
  });
  return { app, store };
}
