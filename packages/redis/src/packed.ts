// The hot scripts' replies (check.lua, check_batch.lua): one string of little-endian doubles, which
// Lua's struct.pack writes (`<d` per value) and this reads back. A table reply costs Redis ≈ 6,000
// instructions of conversion plus ≈ 600 per element; seven packed doubles ≈ 3,400 (bench section
// 12's micro-measurements, packages/bench/README.md), and every double comes back exact (no %.17g
// text, no truncation of a non-integer by Redis).
import { RedisStoreError } from "./errors.js";

/** The doubles of a packed reply, in order (a length that is not a multiple of 8 is GQ_ERR_SCRIPT_REPLY). */
export function unpackDoubles(buf: Buffer): number[] {
  if (buf.length % 8 !== 0) {
    throw new RedisStoreError("GQ_ERR_SCRIPT_REPLY", `packed reply of ${buf.length} bytes`);
  }
  const out = new Array<number>(buf.length / 8);
  for (let i = 0; i < out.length; i++) out[i] = buf.readDoubleLE(8 * i);
  return out;
}
