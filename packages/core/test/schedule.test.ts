// The share schedule (src/reference/schedule.ts, lua/lib/schedule.lua): s(t) around loans, returns
// and recovery, and the schedule of its real changes.
import { describe, expect, it } from "vitest";
import { buildSchedule, emptyLoanBook, type ShareInputs, shareAt, shareBreakpoints } from "../src/index.js";

const eps = 250;
function inputs(): ShareInputs {
  const book = emptyLoanBook();
  book.outstanding.set("us", [
    { units: 300, deadlineUs: 10_000, seq: 1 },
    { units: 100, deadlineUs: 20_000, seq: 2 },
  ]);
  book.received.set("ap", { units: 50, deadlineUs: 15_000, seq: 7 });
  return { baseShare: 1000, floorShare: 20, recoveryEndUs: 0, holdEndUs: 0, epsilonUs: eps, book };
}

describe("s(t)", () => {
  it("reserves the max outstanding until deadline + ε, uses a loan until deadline − ε", () => {
    const inp = inputs();
    expect(shareAt(inp, 0)).toBe(1000 - 300 + 50);
    expect(shareAt(inp, 10_000 + eps - 1)).toBe(1000 - 300 + 50);
    expect(shareAt(inp, 10_000 + eps)).toBe(1000 - 100 + 50);
    expect(shareAt(inp, 15_000 - eps - 1)).toBe(1000 - 100 + 50);
    expect(shareAt(inp, 15_000 - eps)).toBe(1000 - 100);
    expect(shareAt(inp, 20_000 + eps)).toBe(1000);
    expect(shareBreakpoints(inp, 0)).toEqual([10_000 + eps, 15_000 - eps, 20_000 + eps]);
  });

  it("ignores a loan whose seq was returned (trap 12), and is min(floor, base) in recovery", () => {
    const inp = inputs();
    inp.book.returned.set("ap", 7);
    expect(shareAt(inp, 0)).toBe(700);
    expect(shareAt({ ...inp, recoveryEndUs: 5_000 }, 4_999)).toBe(20);
    expect(shareAt({ ...inp, recoveryEndUs: 5_000 }, 5_000)).toBe(700);
  });

  it("the schedule lists only real changes, leases included", () => {
    const s = buildSchedule(inputs(), [{ tokens: 3, expiryUs: 12_000 }], 0);
    expect(s).toMatchObject({ share: 750, outstanding: 3 });
    expect(s.next.map((p) => [p.atUs, p.share, p.outstanding])).toEqual([
      [10_250, 950, 3],
      [12_000, 950, 0],
      [14_750, 900, 0],
      [20_250, 1000, 0],
    ]);
  });
});
