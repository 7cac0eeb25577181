// The orchestrator's readiness signal (src/cluster/ready.ts) with real child
// processes: a process that reports ready is waited for exactly that long; one
// that exits first, or says anything else, is an error naming its output.
import { fileURLToPath } from "node:url";
import { spawnManaged, waitFor } from "@geoquota/procs";
import { afterEach, describe, expect, it } from "vitest";
import { READY_IPC_ENV, readySignal } from "../src/cluster/ready.js";

const started: Array<{ stop(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});

function child(script: string) {
  const p = spawnManaged(process.execPath, ["-e", script], {}, { ipc: true });
  started.push(p);
  return p;
}

/** The fixture that calls reportReady, with an IPC channel; its messages are collected. */
function reporter(env: Record<string, string>) {
  const fixture = fileURLToPath(new URL("./fixtures/reports-ready.ts", import.meta.url));
  const p = spawnManaged(process.execPath, ["--import", "tsx", fixture], env, { ipc: true });
  started.push(p);
  const messages: unknown[] = [];
  p.child.on("message", (m) => messages.push(m));
  return { p, messages };
}

describe("readiness over IPC", () => {
  it("a command started by the orchestrator reports ready once, with its addresses, then closes the channel", async () => {
    const { p, messages } = reporter({ [READY_IPC_ENV]: "1" });
    expect(await readySignal(p, "reporter", 60_000, ["http"])).toEqual({ http: "127.0.0.1:7000" });
    await waitFor("the channel closed", () => !p.child.connected, 10_000);
    expect(messages).toEqual([{ type: "geoquota:ready", listeners: { http: "127.0.0.1:7000" } }]);
    expect(p.child.exitCode).toBe(null);
  });

  it("a command started by anyone else (no GQ_READY_IPC) sends nothing, even with a channel", async () => {
    const { p, messages } = reporter({});
    await waitFor("the fixture to run reportReady", () => p.output().includes("reported"), 60_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(messages).toEqual([]);
    expect(p.child.connected).toBe(true);
  });

  it("rejects when the process exits before reporting, with its output", async () => {
    const p = child(`process.send("something else"); console.error("bad config"); process.exit(3);`);
    await expect(readySignal(p, "test child", 10_000)).rejects.toThrow(
      /test child: process exited:\n.*bad config/s,
    );
  });

  it("rejects a ready message without a listener the orchestrator needs", async () => {
    const p = child(
      `process.send({ type: "geoquota:ready", listeners: { http: "127.0.0.1:1" } }); setInterval(() => {}, 1000);`,
    );
    await expect(readySignal(p, "test child", 10_000, ["http", "gossip"])).rejects.toThrow(
      "test child: reported ready without gossip",
    );
  });

  it("rejects after the timeout when the process never reports", async () => {
    const p = child("setInterval(() => {}, 1000);");
    await expect(readySignal(p, "test child", 300)).rejects.toThrow(
      "timed out after 300 ms waiting for test child",
    );
  });
});
