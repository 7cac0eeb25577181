// RegionStore.wake on a real Redis: the store publishes its region on
// WAKE_CHANNEL, where the region's gossip daemon subscribes (gossip
// daemon/main.ts) to bring its next round forward (DESIGN §3 "Demand,
// targets and lending").
import { WAKE_CHANNEL } from "@geoquota/redis";
import { describe, expect, it } from "vitest";
import { freshRegionPerFile } from "./redis-helpers.js";

const fx = freshRegionPerFile();

describe("a store's wake", () => {
  it("publishes the region on the wake channel, once per call", async () => {
    const sub = fx.redis.duplicate();
    try {
      const got: string[] = [];
      sub.on("message", (channel: string, message: string) => {
        if (channel === WAKE_CHANNEL) got.push(message);
      });
      await sub.subscribe(WAKE_CHANNEL);
      const wake = fx.setup.store.wake;
      if (wake === undefined) throw new Error("the Redis store has no wake()");
      wake.call(fx.setup.store);
      wake.call(fx.setup.store);
      const deadline = Date.now() + 5000;
      while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(got).toEqual(["eu", "eu"]);
    } finally {
      sub.disconnect();
    }
  });
});
