import { readFileSync } from "node:fs";
import { encode } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CrdtMap,
  type DeltaFrame,
  decodeFrame,
  encodeFrame,
  type ErrorCode,
  type Frame,
  KeyRecord,
  PROTOCOL_VERSION,
} from "../src/index.js";
import { mapArb } from "./arbitraries.js";
import { GOLDEN_V1 } from "./golden/fixtures.js";

function framesEqual(a: Frame, b: Frame): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === "delta" && b.kind === "delta") {
    return (
      a.from === b.from &&
      a.version === b.version &&
      a.entries.length === b.entries.length &&
      a.entries.every(
        (e, i) => e.key === b.entries[i]?.key && KeyRecord.equals(e.record, b.entries[i].record),
      )
    );
  }
  return JSON.stringify(a) === JSON.stringify(b);
}

function codeOf(bytes: Uint8Array, limits?: Parameters<typeof decodeFrame>[1]): ErrorCode | "ok" {
  const r = decodeFrame(bytes, limits);
  return r.ok ? "ok" : r.error.code;
}

const wire = (v: unknown): Uint8Array => encode(v);

describe("codec v1", () => {
  it("round-trips random maps as delta frames", () => {
    fc.assert(
      fc.property(mapArb, fc.integer({ min: 0, max: 2 ** 53 - 1 }), (m, version) => {
        const frame: DeltaFrame = {
          kind: "delta",
          from: "us-east",
          version,
          entries: [...m].map(([key, record]) => ({ key, record })),
        };
        const r = decodeFrame(encodeFrame(frame));
        if (!r.ok || r.value.kind !== "delta") return false;
        const back = new Map(r.value.entries.map((e) => [e.key, e.record]));
        return framesEqual(frame, r.value) && CrdtMap.equals(back, m);
      }),
      { numRuns: 300 },
    );
  });

  it("omits trailing empty parts: a one-counter change costs well under 64 bytes per key", () => {
    const frameOf = (n: number) =>
      encodeFrame({
        kind: "delta",
        from: "us-east-1",
        version: 1,
        entries: Array.from({ length: n }, (_, i) => {
          const r = KeyRecord.initial();
          r.consumed.p.set("us-east-1.k7f3q2", 123_456 + i);
          return { key: `tenant-${String(i).padStart(5, "0")}|api.search`, record: r };
        }),
      }).byteLength;
    const perKey = (frameOf(101) - frameOf(1)) / 100;
    expect(perKey).toBeLessThanOrEqual(64);
  });

  describe("golden frames of the current version", () => {
    for (const [name, frame] of Object.entries(GOLDEN_V1)) {
      it(`${name}.bin decodes to its fixture and re-encodes byte for byte`, () => {
        const bytes = new Uint8Array(readFileSync(new URL(`./golden/${name}.bin`, import.meta.url)));
        const r = decodeFrame(bytes);
        expect(r.ok).toBe(true);
        expect(r.ok && framesEqual(r.value, frame)).toBe(true);
        expect(Buffer.from(encodeFrame(frame)).equals(Buffer.from(bytes))).toBe(true);
        expect(bytes[1]).toBe(PROTOCOL_VERSION);
      });
    }
  });

  it("round-trips a links frame and rejects a malformed one", () => {
    const frame: Frame = { kind: "links", from: "us-east", up: ["eu-west", "ap-south"] };
    const r = decodeFrame(encodeFrame(frame));
    expect(r.ok && r.value).toEqual(frame);
    expect(codeOf(wire([1, 5, "us", []]))).toBe("ok");
    expect(codeOf(wire([1, 5, "us"]))).toBe("GQ_ERR_INVALID_SHAPE");
    expect(codeOf(wire([1, 5, "us", ["b c"]]))).toBe("GQ_ERR_INVALID_ID");
    expect(codeOf(wire([1, 5, "us", "eu"]))).toBe("GQ_ERR_INVALID_SHAPE");
    expect(codeOf(wire([1, 5, "us", Array.from({ length: 5 }, (_, i) => `r${i}`)]), { idsMax: 4 })).toBe(
      "GQ_ERR_TOO_MANY_ENTRIES",
    );
  });

  it("rejects each kind of malformed frame with its code", () => {
    const ids = ["us.1"];
    const good = [1, 1, "us", 5, ids, [["t|r", [0, 1]]]];
    expect(codeOf(wire(good))).toBe("ok");
    const cases: Array<[unknown, ErrorCode | "ok"]> = [
      [{ a: 1 }, "GQ_ERR_FRAME_MALFORMED"], // maps are never used on the wire
      ["hello", "GQ_ERR_INVALID_SHAPE"],
      [[2, 1, "us", 5, ids, []], "GQ_ERR_UNSUPPORTED_VERSION"],
      [["1", 1], "GQ_ERR_UNSUPPORTED_VERSION"],
      [[1, 9, "us"], "GQ_ERR_UNKNOWN_KIND"],
      [[1, 2, "us"], "GQ_ERR_INVALID_SHAPE"],
      [[1, 2, "u s", 1], "GQ_ERR_INVALID_ID"],
      [[1, 2, "us", -1], "GQ_ERR_INVALID_NUMBER"],
      [[1, 2, "us", 1.5], "GQ_ERR_INVALID_NUMBER"],
      [[1, 2, "us", 2 ** 60], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [0, -1]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [0, Number.NaN]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [0, Number.POSITIVE_INFINITY]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [0, "1"]]]], "GQ_ERR_INVALID_SHAPE"],
      [[1, 1, "us", 5, ids, [["t|r", [1, 1]]]], "GQ_ERR_INVALID_SHAPE"],
      [[1, 1, "us", 5, ids, [["t|r", [0]]]], "GQ_ERR_INVALID_SHAPE"],
      [[1, 1, "us", 5, ids, [["tr", [0, 1]]]], "GQ_ERR_INVALID_KEY"],
      [[1, 1, "us", 5, ids, [[`t|${"r".repeat(129)}`, [0, 1]]]], "GQ_ERR_INVALID_KEY"],
      [[1, 1, "us", 5, ["bad id"], []], "GQ_ERR_INVALID_ID"],
      [[1, 1, "us", 5, ids, [["t|r", [], [], [], [0, 0, 1.5, 1, 1]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [], [], [], [0, 0, 2_000_000, 1, 1]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [], [], [], [0, 0, 1, -1, 1]]]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 1, "us", 5, ids, [["t|r", [], [], [], [], [0, 0]]]], "GQ_ERR_INVALID_SHAPE"],
      [[1, 1, "us", 5, ids, [["t|r", [], [], [], [], [], []]]], "GQ_ERR_TOO_MANY_ENTRIES"],
      [[1, 3, "us", 4, 4, []], "GQ_ERR_INVALID_NUMBER"],
      [[1, 3, "us", 0, 1, ["t|r"]], "GQ_ERR_INVALID_SHAPE"],
      [[1, 3, "us", 0, 1, ["t|r", 2 ** 32]], "GQ_ERR_INVALID_NUMBER"],
      [[1, 4, "us", 5, 0, 0], "ok"],
      [[1, 4, "us", 5, 3, 7], "ok"],
      [[1, 4, "us", 5, 3], "GQ_ERR_INVALID_SHAPE"],
      [[1, 4, "us", 5, 3, 7, 9], "GQ_ERR_INVALID_SHAPE"],
      [[1, 4, "u s", 5, 3, 7], "GQ_ERR_INVALID_ID"],
      [[1, 4, "us", "5", 3, 7], "GQ_ERR_INVALID_SHAPE"],
      [[1, 4, "us", -5, 3, 7], "GQ_ERR_INVALID_NUMBER"],
      [[1, 4, "us", 5, 3.5, 7], "GQ_ERR_INVALID_NUMBER"],
      [[1, 4, "us", 5, 3, 2 ** 60], "GQ_ERR_INVALID_NUMBER"],
      [[1, 4, "us", 0, 3, 7], "GQ_ERR_INVALID_CLOCK"],
      [[1, 4, "us", 5, 3, 3_600_000_001], "GQ_ERR_INVALID_CLOCK"],
      [[1, 4, "us", 5, 0, 7], "GQ_ERR_INVALID_CLOCK"],
    ];
    for (const [value, code] of cases) {
      expect([JSON.stringify(value)?.slice(0, 80), codeOf(wire(value))]).toEqual([
        JSON.stringify(value)?.slice(0, 80),
        code,
      ]);
    }
    expect(codeOf(new Uint8Array([0x91, 0x01, 0x02]))).toBe("GQ_ERR_FRAME_MALFORMED"); // trailing byte
    expect(codeOf(new Uint8Array([]))).toBe("GQ_ERR_FRAME_MALFORMED");
  });

  it("enforces the size and count limits", () => {
    const entries = Array.from({ length: 11 }, (_, i) => [`t|r${i}`, [0, 1]]);
    const bytes = wire([1, 1, "us", 5, ["us.1"], entries]);
    expect(codeOf(bytes)).toBe("ok");
    expect(codeOf(bytes, { entriesMax: 10 })).toBe("GQ_ERR_TOO_MANY_ENTRIES");
    expect(codeOf(bytes, { frameBytesMax: 10 })).toBe("GQ_ERR_FRAME_TOO_LARGE");
    expect(codeOf(wire([1, 1, "us", 5, ["a.1", "b.1"], []]), { idsMax: 1 })).toBe("GQ_ERR_TOO_MANY_ENTRIES");
    const manyReplicas = [1, 1, "us", 5, ["us.1"], [["t|r", Array.from({ length: 6 }, () => [0, 1]).flat()]]];
    expect(codeOf(wire(manyReplicas), { itemsPerPartMax: 2 })).toBe("GQ_ERR_TOO_MANY_ENTRIES");
    // A string longer than any key is refused by the msgpack layer itself.
    expect(codeOf(wire([1, 2, "x".repeat(300), 1]))).toBe("GQ_ERR_FRAME_MALFORMED");
  });

  it("resolves a pair repeated inside one record the way join does", () => {
    const bytes = wire([
      1,
      1,
      "us",
      5,
      ["us", "eu"],
      [["t|r", [], [], [], [0, 1, 9, 9, 3, 0, 1, 5, 5, 3, 0, 1, 1, 1, 2]]],
    ]);
    const r = decodeFrame(bytes);
    expect(r.ok && r.value.kind === "delta" && r.value.entries[0]?.record.loans.get("us>eu")).toEqual({
      lender: "us",
      borrower: "eu",
      units: 5,
      deadlineUs: 5,
      seq: 3,
    });
  });
});
