// Random and mutated byte strings must always give a typed result: never a
// throw, never a code outside the catalog.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeFrame, ERRORS, encodeFrame, type Frame, KeyRecord } from "../src/index.js";
import { mapArb } from "./arbitraries.js";

function typed(bytes: Uint8Array): boolean {
  const r = decodeFrame(bytes);
  return r.ok || Object.hasOwn(ERRORS, r.error.code);
}

const validFrameArb: fc.Arbitrary<Uint8Array> = fc.oneof(
  mapArb.map((m) =>
    encodeFrame({
      kind: "delta",
      from: "us",
      version: 3,
      entries: [...m].map(([key, record]) => ({ key, record })),
    }),
  ),
  fc.nat().map((v) => encodeFrame({ kind: "ack", from: "eu", version: v })),
  fc.array(fc.nat({ max: 0xffffffff })).map((hs) =>
    encodeFrame({
      kind: "digest",
      from: "ap",
      bucket: 0,
      bucketCount: 1,
      entries: hs.map((hash, i) => ({ key: `t|k${i}`, hash })),
    }),
  ),
);

describe("decoder fuzz", () => {
  it("random bytes", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 512 }), typed), { numRuns: 3000 });
  });

  it("mutated valid frames: flipped bytes, truncation, insertion", () => {
    const mutation = fc.record({
      flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
      cut: fc.option(fc.nat()),
      insert: fc.option(fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 }))),
    });
    fc.assert(
      fc.property(validFrameArb, mutation, (bytes, m) => {
        let b = new Uint8Array(bytes);
        for (const [pos, val] of m.flips) if (b.length > 0) b[pos % b.length] = val;
        if (m.cut !== null && b.length > 0) b = b.slice(0, m.cut % b.length);
        if (m.insert !== null) {
          const at = m.insert[0] % (b.length + 1);
          b = new Uint8Array([...b.slice(0, at), ...m.insert[1], ...b.slice(at)]);
        }
        return typed(b);
      }),
      { numRuns: 3000 },
    );
  });

  it("hostile shapes: deep nesting, huge declared lengths, ext types, bigints", () => {
    const deep = new Uint8Array(200_000).fill(0x91); // [[[[...
    const hugeArray = new Uint8Array([0xdd, 0xff, 0xff, 0xff, 0xff]); // array32 of 4G items
    const hugeStr = new Uint8Array([0xdb, 0x7f, 0xff, 0xff, 0xff]);
    const ext = new Uint8Array([0xd6, 0xff, 0, 0, 0, 1]); // timestamp ext
    const u64 = new Uint8Array([
      0x94, 0x01, 0x02, 0xa2, 0x75, 0x73, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]);
    for (const b of [deep, hugeArray, hugeStr, ext, u64]) {
      const r = decodeFrame(b);
      expect(r.ok).toBe(false);
    }
  });

  it("valid frames still decode (the fuzz corpus is not vacuous)", () => {
    const r = KeyRecord.initial();
    r.denied.set("us.1", 1);
    const f: Frame = { kind: "delta", from: "us", version: 1, entries: [{ key: "t|r", record: r }] };
    expect(decodeFrame(encodeFrame(f)).ok).toBe(true);
  });
});
