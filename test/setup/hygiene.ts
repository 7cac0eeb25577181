// Test hygiene, loaded before every test file:
// - stray console output fails the test that produced it (a library that logs
//   on its hot path, or a forgotten debug print, is a bug we want to see);
// - an unhandled rejection fails the run (vitest reports it as an error).
import { afterEach, beforeEach, vi } from "vitest";

const methods = ["log", "info", "warn", "error", "debug"] as const;
let captured: string[] = [];

beforeEach(() => {
  captured = [];
  for (const m of methods) {
    vi.spyOn(console, m).mockImplementation((...args: unknown[]) => {
      captured.push(`console.${m}: ${args.map(String).join(" ")}`);
    });
  }
});

afterEach(() => {
  for (const m of methods) vi.mocked(console[m]).mockRestore();
  if (captured.length > 0) {
    const lines = captured.join("\n");
    captured = [];
    throw new Error(`stray console output during the test:\n${lines}`);
  }
});
