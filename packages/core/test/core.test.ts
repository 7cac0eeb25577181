// Incarnation markers and recovery (src/reference/core.ts, lua/lib/core.lua).
import { describe, expect, it } from "vitest";
import { freshIncarnation, newIncarnation, parseMarker, recoveryEndUs } from "../src/index.js";

describe("incarnation marker", () => {
  it("new incarnations are born now; a fresh cluster's at 0", () => {
    expect(parseMarker(newIncarnation(123))).toEqual({ id: "123", bornUs: 123 });
    expect(parseMarker(freshIncarnation(456))).toEqual({ id: "456", bornUs: 0 });
    expect(recoveryEndUs(100, { epsilonUs: 10, loanDurationUs: 1000 })).toBe(1120);
  });
});
