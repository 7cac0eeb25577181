// Fail closed while the region's Redis drifted from a setting the start check
// verified (DESIGN §4 "Checked continuously"): an evicting maxmemory-policy
// (a bucket or loan book may be dropped while the markers survive) or more
// connected replicas than `redis.replicas` (a write could be answered before a
// replica that may be promoted has it). The primary watcher finds the drift;
// this wrapper refuses what hands quota out (checks, compound checks, lease
// grants) with an error the guarded store reports as "store unavailable", so
// the limiter takes its degraded path (held leases, explicit fail-open, else
// deny), exactly as for a write that is not durable. Refunds, releases and
// reads pass: they hand nothing out.
import type { LeaseRenewingStore } from "./leased-client.js";
import type { RegionStore } from "@geoquota/core";

export class SetupDriftError extends Error {
  constructor(
    readonly op: string,
    readonly settings: readonly string[],
  ) {
    super(`${op} refused: the region's Redis drifted from a checked setting (${settings.join(", ")})`);
    this.name = "SetupDriftError";
  }
}

/** `store` refusing admissions while `drifting()` names a setting. */
export function refuseWhileDrifting(store: RegionStore, drifting: () => readonly string[]): RegionStore {
  const guard = (op: string) => {
    const now = drifting();
    if (now.length > 0) throw new SetupDriftError(op, now);
  };
  const wrapped: RegionStore & Partial<LeaseRenewingStore> = {
    region: store.region,
    async check(policy, cost) {
      guard("check");
      return store.check(policy, cost);
    },
    async checkCompound(items) {
      guard("checkCompound");
      return store.checkCompound(items);
    },
    refund: (policy, cost, receipt) => store.refund(policy, cost, receipt),
    async acquireLease(policy, tokens, durationMs) {
      guard("acquireLease");
      return store.acquireLease(policy, tokens, durationMs);
    },
    releaseLease: (policy, leaseId, used) => store.releaseLease(policy, leaseId, used),
    inspect: (policy) => store.inspect(policy),
    close: () => store.close(),
  };
  if (store.ping !== undefined) {
    const ping = store.ping.bind(store);
    wrapped.ping = () => ping();
  }
  // A reset only lowers what a key may admit (docs/design.md §3.4): it hands nothing out.
  if (store.reset !== undefined) {
    const reset = store.reset.bind(store);
    wrapped.reset = (policy) => reset(policy);
  }
  // An assignment hands a burst and a rate to a proxy (RLQS): a grant, refused like a lease. A
  // usage report only counts what the proxy already admitted.
  if (store.reserveAssignment !== undefined) {
    const reserve = store.reserveAssignment.bind(store);
    wrapped.reserveAssignment = async (policy, ask) => {
      guard("reserveAssignment");
      return reserve(policy, ask);
    };
  }
  if (store.countUsage !== undefined) {
    const count = store.countUsage.bind(store);
    wrapped.countUsage = (policy, allowed, denied) => count(policy, allowed, denied);
  }
  // A wake hands nothing out: the daemon's round still holds grants while the setup drifts.
  if (store.wake !== undefined) {
    const wake = store.wake.bind(store);
    wrapped.wake = () => wake();
  }
  const renewing = store as RegionStore & Partial<LeaseRenewingStore>;
  if (typeof renewing.renewLease === "function") {
    const renew = renewing.renewLease.bind(renewing);
    wrapped.renewLease = async (policy, releases, tokens, durationMs) => {
      // A release alone hands nothing out; a renewal that also takes tokens is a grant.
      if (tokens > 0) guard("renewLease");
      return renew(policy, releases, tokens, durationMs);
    };
  }
  return wrapped;
}
