// The local cluster's log plumbing (src/cluster/logs.ts) on real child
// processes: every line to the process's own file and, when asked, to one
// stream prefixed with the process's name; colour only when allowed, and then
// never an escape sequence in a file or in plain output, even one the child wrote.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnManaged } from "@geoquota/procs";
import { afterEach, describe, expect, it } from "vitest";
import { clusterLogs, colorAllowed, stripAnsi } from "../src/cluster/logs.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A node process writing `lines` (stdout, then one on stderr), one write per line, then exiting. */
function writer(lines: string[]) {
  const script = `const l = ${JSON.stringify(lines)}; for (const x of l) process.stdout.write(x + "\\n"); process.stderr.write("to stderr\\n");`;
  return spawnManaged(process.execPath, ["-e", script]);
}

async function run(color: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "gq-logs-"));
  dirs.push(dir);
  const seen: string[] = [];
  const logs = clusterLogs(dir, { color, write: (l) => seen.push(l) }, [
    "us-east-limiter",
    "ap-south-gossip",
  ]);
  const a = writer(["\u001b[31mred\u001b[0m line", '{"level":30,"msg":"listening"}']);
  const b = writer(["half", "second"]);
  logs.attach("us-east-limiter", a);
  logs.attach("ap-south-gossip", b);
  await Promise.all([a.exited, b.exited]);
  // 'end' of the pipes may follow 'exit': give the last chunks a turn.
  await new Promise((r) => setTimeout(r, 50));
  await logs.close();
  return { dir, seen, logs };
}

describe("cluster logs", () => {
  it("writes each process's lines to its own file, without escape sequences", async () => {
    const { logs } = await run(true);
    const a = readFileSync(logs.file("us-east-limiter"), "utf8");
    expect(a.split("\n").filter(Boolean).sort()).toEqual(
      ["red line", '{"level":30,"msg":"listening"}', "to stderr"].sort(),
    );
    expect(a.includes("\u001b"), "an escape in the file").toBe(false);
    const b = readFileSync(logs.file("ap-south-gossip"), "utf8").split("\n").filter(Boolean);
    expect(b.sort()).toEqual(["half", "second", "to stderr"]);
  });

  it("prefixes every printed line with its process's name, one width; no ANSI when colour is off", async () => {
    const { seen } = await run(false);
    expect(seen).toHaveLength(6);
    for (const l of seen) expect(l).toMatch(/^(us-east-limiter|ap-south-gossip) \| \S.*\n$/);
    expect(seen.join("").includes("\u001b"), "an escape in plain output").toBe(false);
    expect(seen).toContain("us-east-limiter | red line\n");
  });

  it("colours the prefix (and keeps the child's colours) only when colour is allowed", async () => {
    const { seen } = await run(true);
    const line = seen.find((l) => l.includes("red"));
    expect(line).toBe("\u001b[36mus-east-limiter |\u001b[0m \u001b[31mred\u001b[0m line\n");
  });

  it("allows colour on a terminal only, and never with NO_COLOR set", () => {
    expect(colorAllowed({ isTTY: true }, {})).toBe(true);
    expect(colorAllowed({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colorAllowed({ isTTY: true }, { NO_COLOR: "" })).toBe(true);
    expect(colorAllowed({ isTTY: false }, {})).toBe(false);
    expect(colorAllowed({}, {})).toBe(false);
    expect(stripAnsi("\u001b[1;32mok\u001b[0m \u001b]0;title\u0007done")).toBe("ok done");
  });
});
