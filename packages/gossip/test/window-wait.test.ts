// Which rollouts wait one window more (docs/design.md §3.5): a key that resolves to a window
// algorithm in either document and differently in the two; nothing else.
import { parsePolicies } from "@geoquota/config";
import { describe, expect, it } from "vitest";
import { windowChangeMs } from "../src/daemon/window-wait.js";

const IDS = ["a", "b"];
const set = (doc: unknown) => parsePolicies(doc, "test", IDS);
const tb = { algorithm: "token_bucket", capacity: 10, refillPerSecond: 5 };
const win = (weights: Record<string, number>, windowMs = 60_000) => ({
  algorithm: "fixed_window",
  capacity: 100,
  windowMs,
  weights,
});
const entry = (spec: object) => ({ tenant: "t", resource: "api", ...spec });

describe("windowChangeMs", () => {
  it("0 when every window-algorithm key resolves as before, even if token-bucket keys change", () => {
    const a = set({ default: tb, policies: [entry(win({ a: 3, b: 1 }))] });
    expect(windowChangeMs(a, a)).toBe(0);
    const b = set({ default: { ...tb, capacity: 20 }, policies: [entry(win({ a: 3, b: 1 }))] });
    expect(windowChangeMs(a, b)).toBe(0);
  });

  it("the window when a window key is re-weighted, raised, made a window key, or shadowed", () => {
    const a = set({ default: tb, policies: [entry(win({ a: 3, b: 1 }))] });
    expect(windowChangeMs(a, set({ default: tb, policies: [entry(win({ a: 1, b: 1 }))] }))).toBe(60_000);
    expect(
      windowChangeMs(a, set({ default: tb, policies: [entry({ ...win({ a: 3, b: 1 }), capacity: 200 })] })),
    ).toBe(60_000);
    expect(windowChangeMs(set({ default: tb }), a)).toBe(60_000);
    expect(
      windowChangeMs(a, set({ default: tb, policies: [entry({ ...win({ a: 3, b: 1 }), shadow: true })] })),
    ).toBe(60_000);
    // The longer window of the two when the window itself changes.
    expect(windowChangeMs(a, set({ default: tb, policies: [entry(win({ a: 3, b: 1 }, 120_000))] }))).toBe(
      120_000,
    );
  });

  it("a key that falls back to a window default (its entry removed) or to a resource default", () => {
    const dflt = win({ a: 1, b: 1 }, 30_000);
    const a = set({ default: dflt, policies: [entry(tb)] });
    expect(windowChangeMs(a, set({ default: dflt }))).toBe(30_000);
    const r = set({ default: tb, policies: [{ tenant: "*", resource: "api", ...win({ a: 3, b: 1 }) }] });
    expect(
      windowChangeMs(
        r,
        set({ default: tb, policies: [{ tenant: "*", resource: "api", ...win({ a: 1, b: 3 }) }] }),
      ),
    ).toBe(60_000);
    // The unnamed key: a default that changes.
    expect(windowChangeMs(set({ default: dflt }), set({ default: { ...dflt, capacity: 50 } }))).toBe(30_000);
  });
});
