// The same whole-protocol simulation of the production daemon with every
// fault at its worst (30% drop and duplication, up to 900 ms latency,
// frequent partitions, two state losses, two daemon restarts, a policy
// change, two failovers with the daemon down around them, some ending a
// replica stall). A separate file so
// vitest runs it beside protocol.sim.test.ts. A failure prints the command
// that replays its seed (GQ_SEED=<n> … -t "<kind>").
import { isLongMode } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import { HARSH_SEED_KINDS, runSeedKind, seedCountOf } from "../src/index.js";

const TOTAL = HARSH_SEED_KINDS.reduce((a, k) => a + seedCountOf(k), 0);
/** Long mode runs 20× the seeds of each kind. */
const KIND_TIMEOUT_MS = isLongMode() ? 20 * 600_000 : 600_000;

describe(`whole protocol, harsh faults: ${TOTAL} seeds`, () => {
  for (const kind of HARSH_SEED_KINDS) {
    it(
      `${kind.label}: ${seedCountOf(kind)} seeds, safe with every fault at its worst`,
      async () => {
        const t = await runSeedKind(kind, "protocol.faults.sim");
        expect(t.seeds).toBe(seedCountOf(kind));
        if (t.seeds >= 50) for (const what of kind.covers) expect(t[what], what).toBeGreaterThan(0);
      },
      KIND_TIMEOUT_MS,
    );
  }
});
