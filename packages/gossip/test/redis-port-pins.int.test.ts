// The daemon's Redis port tells the return planner how much share backs the
// in-process leases outstanding in this region (DESIGN §3: leases pin share),
// and it uses the region's leased mode (part of every bucket fingerprint).
import type { KeyPolicy } from "@geoquota/core";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { keyPolicy, redisPerFile } from "@geoquota/testkit";
import { expect, it } from "vitest";
import { createRedisDaemonStore } from "../src/daemon/redis-port.js";

const fx = redisPerFile(initFreshRegion);

const policy: KeyPolicy = keyPolicy({
  tenant: "pins",
  capacity: 100,
  refillPerSecond: 10,
  baseShare: 500_000,
});

it("readKey reports ⌈U·leased/C⌉ as the lease-pinned share", async () => {
  const config = { region: "eu", lease: { epsilonMs: 250, loanDurationMs: 3000 }, leased: { enabled: true } };
  const port = await createRedisDaemonStore(fx.redis, config as Parameters<typeof createRedisDaemonStore>[1]);
  const store = createRedisStore({
    redis: fx.redis,
    region: "eu",
    timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000, leasedMode: true },
  });
  expect((await port.readKey(policy)).leasePinnedPpm).toBe(0);
  const l = await store.acquireLease(policy, 33, 2000);
  expect(l.granted).toBe(33);
  expect((await port.readKey(policy)).leasePinnedPpm).toBe(330_000);
  await store.releaseLease(policy, l.leaseId, 33);
  expect((await port.readKey(policy)).leasePinnedPpm).toBe(0);
  await port.close();
});
