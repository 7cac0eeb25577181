// The import rules of docs/architecture.md hold: dependency-cruiser runs with
// .dependency-cruiser.cjs over packages/ and test/ (no cycles; crdt, sim,
// lease, config and testkit import nothing of ours; the layering of limiter,
// gossip, stream and bench; no test kit, test code or simulation in package
// sources, apart from the commented temporary exceptions of the config).
// Being a vitest file of project `integration`, it runs in `npm test`.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
// A root devDependency (pinned in package.json); its exports do not expose the bin.
const DEPCRUISE = fileURLToPath(
  new URL("../node_modules/dependency-cruiser/bin/dependency-cruise.mjs", import.meta.url),
);

interface Violation {
  readonly from: string;
  readonly to: string;
  readonly rule: { readonly name: string; readonly severity: string };
  readonly cycle?: readonly { readonly name: string }[];
}
interface CruiseResult {
  readonly summary: {
    readonly violations: readonly Violation[];
    readonly totalCruised: number;
    readonly totalDependenciesCruised: number;
  };
}

function cruise(): CruiseResult {
  const run = spawnSync(
    process.execPath,
    [DEPCRUISE, "--config", ".dependency-cruiser.cjs", "--output-type", "json", "packages", "test"],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
  );
  if (run.error) throw run.error;
  if (!run.stdout.trim().startsWith("{")) {
    throw new Error(`dependency-cruiser failed (exit ${run.status}):\n${run.stderr}${run.stdout}`);
  }
  return JSON.parse(run.stdout) as CruiseResult;
}

describe("import rules (docs/architecture.md, .dependency-cruiser.cjs)", () => {
  it("every package and test file follows them", { timeout: 120_000 }, () => {
    const { summary } = cruise();
    // The scan saw the workspace (not an empty or mis-rooted run).
    expect(summary.totalCruised).toBeGreaterThan(200);
    expect(summary.totalDependenciesCruised).toBeGreaterThan(500);
    const lines = summary.violations.map(
      (v) =>
        `${v.rule.name}: ${v.from} → ${v.to}` +
        (v.cycle ? ` (cycle: ${v.cycle.map((c) => c.name).join(" → ")})` : ""),
    );
    expect(lines).toEqual([]);
  });
});
