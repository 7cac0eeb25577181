// The README's local-cluster walkthrough (§ "A local cluster"), run as written:
// the shell block between the `readme-walkthrough` markers is extracted from
// README.md and executed by bash in an empty directory, so the README cannot
// drift from what works (issue 22: "a newcomer can follow README from
// `geoquota cluster --json` through a policy change, a metrics scrape and a
// log read without reading source"). The one thing mirrored rather than
// taken as is: `npx geoquota` resolves to this checkout's built CLI (run from a
// clone, npx finds it in node_modules/.bin; from a temp directory it would ask
// the registry instead), and `.bin/` (the bootstrap's tools: the RLS client) is
// linked into the directory, as a clone has it.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cliBin, repoRoot, waitFor } from "@geoquota/testkit";
import { afterAll, describe, expect, it } from "vitest";

const README = fileURLToPath(new URL("../README.md", import.meta.url));

/** The walkthrough's shell block: the ```sh fence between the markers. */
function walkthroughBlock(readme: string): string {
  const begin = readme.indexOf("<!-- readme-walkthrough:begin");
  const end = readme.indexOf("<!-- readme-walkthrough:end -->");
  if (begin < 0 || end < begin) throw new Error("README.md: readme-walkthrough markers not found");
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(begin, end));
  if (m === null) throw new Error("README.md: no ```sh block between the readme-walkthrough markers");
  return m[1] as string;
}

const running = (pids: readonly number[]) =>
  pids.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });

interface Line {
  pid: number;
  logDir: string;
  regions: { pids: Record<string, number> }[];
}

describe("the README's local-cluster walkthrough, as written", () => {
  const dir = mkdtempSync(join(tmpdir(), "gq-readme-"));
  let shell: ReturnType<typeof spawn> | undefined;
  const line = (): Line | undefined => {
    const f = join(dir, "cluster.json");
    if (!existsSync(f)) return undefined;
    try {
      return JSON.parse(readFileSync(f, "utf8")) as Line;
    } catch {
      return undefined;
    }
  };
  afterAll(async () => {
    // Whatever the script reached: stop the cluster it started and the shell.
    const l = line();
    if (l !== undefined && running([l.pid]).length > 0) process.kill(l.pid, "SIGTERM");
    if (shell?.pid !== undefined && shell.exitCode === null) process.kill(-shell.pid, "SIGTERM");
    if (l !== undefined) {
      await waitFor("the cluster's processes to exit", async () => running(allPids(l)).length === 0, 30_000);
      rmSync(l.logDir, { recursive: true, force: true });
    }
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  const allPids = (l: Line) => [l.pid, ...l.regions.flatMap((r) => Object.values(r.pids))];

  it("runs from `cluster --json` through a policy change, status --wait, apply, metrics, logs, reset, history and the stop", async () => {
    const block = walkthroughBlock(readFileSync(README, "utf8"));
    const script = [
      "set -euo pipefail",
      `npx() { if [ "$1" = geoquota ]; then shift; node ${JSON.stringify(cliBin())} "$@"; else echo "npx $1: not part of the walkthrough" >&2; return 1; fi; }`,
      block,
      // The script's last command stopped the cluster; its background job ends with it.
      "wait",
    ].join("\n");
    writeFileSync(join(dir, "walkthrough.sh"), script);
    symlinkSync(join(repoRoot, ".bin"), join(dir, ".bin"));
    shell = spawn("bash", ["walkthrough.sh"], {
      cwd: dir,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    shell.stdout?.on("data", (c: Buffer) => {
      out += c.toString();
    });
    shell.stderr?.on("data", (c: Buffer) => {
      err += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => shell?.once("exit", (c) => resolve(c)));
    expect(code, `stdout:\n${out}\nstderr:\n${err}`).toBe(0);

    // What each step printed, in order.
    expect(out).toContain('"allowed":true'); // the check
    expect(out).toMatch(/"overall":"(OK|OVER_LIMIT)"/); // Envoy's RLS through the Go client
    expect(out).toMatch(/^# v0@seed#[0-9a-f]{32} \(stable\)$/m); // policy get
    expect(out).toMatch(/^region eu-west: target v\d+@us-east#[0-9a-f]{8}, completed here v\d+@us-east/m); // status --wait --version
    expect(out).toMatch(/^v\d+@eu-west#[0-9a-f]{8} arrived in every region$/m); // apply --wait
    expect(out).toMatch(/^geoquota_region_recovering 0$/m); // the daemon's metrics
    expect(out).toMatch(/"name":"gossip:eu-west"/); // the daemon's log
    expect(out).toMatch(/^reset cust_a\/checkout in us-east: /m);
    expect(out).toMatch(/PUT \/v1\/policies\/:tenant\/:resource \(tenant=cust_a resource=checkout\)\s+202/); // history
    expect(out).toMatch(
      /POST \/v1\/quotas\/:tenant\/:resource\/reset \(tenant=cust_a resource=checkout\)\s+200/,
    );
    // The file the jq line wrote is the newest document plus the deny list (what apply proposed).
    const applied = JSON.parse(readFileSync(join(dir, "policies.json"), "utf8")) as {
      deny: unknown;
      policies: { tenant: string }[];
    };
    expect(applied.deny).toEqual([{ tenant: "blocked" }]);
    expect(applied.policies).toContainEqual(expect.objectContaining({ tenant: "cust_a", capacity: 100 }));

    // The last line stopped every process the cluster started.
    const l = line();
    expect(l).toBeDefined();
    await waitFor(
      "every cluster process to exit",
      async () => running(allPids(l as Line)).length === 0,
      30_000,
    );
  }, 240_000);
});
