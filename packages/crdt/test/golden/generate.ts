// Regenerates the golden frames: pnpm tsx packages/crdt/test/golden/generate.ts
// Run it only when adding a new protocol version's fixtures; never to "fix" a
// failing golden test of an existing version.
import { writeFileSync } from "node:fs";
import { encodeFrame } from "../../src/index.js";
import { GOLDEN_V1 } from "./fixtures.js";

for (const [name, frame] of Object.entries(GOLDEN_V1)) {
  writeFileSync(new URL(`./${name}.bin`, import.meta.url), encodeFrame(frame));
}
