// The local cluster's process logs: every line a process writes (stdout and
// stderr) goes to its own file in the log directory and, when asked, to one
// stream prefixed with the process's name ("us-east/limiter | …"). Colour only
// on a terminal without NO_COLOR; otherwise no escape sequence at all, not even
// one a child wrote, so a log file or a pipe reads as plain text.
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import type { ManagedProcess } from "@geoquota/procs";

/** Where a prefixed line goes (e.g. process.stdout), and whether it may carry colour. */
export interface LogSink {
  write(line: string): void;
  readonly color: boolean;
}

/** Colour on `stream` as the convention has it: a terminal, and NO_COLOR unset or empty. */
export function colorAllowed(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "");
}

// CSI and OSC sequences (colours, cursor moves, titles) and lone escapes.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching escape sequences is the point
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-_]/g;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, "");
}

const COLORS = [36, 33, 35, 32, 34, 31]; // cyan, yellow, magenta, green, blue, red

export interface ClusterLogs {
  /** The directory holding one `<region>-<role>.log` per process. */
  readonly dir: string;
  /** The log file of process `name` ("us-east-limiter"). */
  file(name: string): string;
  /** Copies `proc`'s output (what it wrote so far, then every new line) under `name`. */
  attach(name: string, proc: ManagedProcess, opts?: { replay?: boolean }): void;
  /** Flushes and closes the files. */
  close(): Promise<void>;
}

/**
 * Log files in `dir` (created), and prefixed lines to `sink` when given;
 * `known`: the processes known in advance, so every prefix has one width.
 */
export function clusterLogs(dir: string, sink?: LogSink, known: readonly string[] = []): ClusterLogs {
  const names = [...known];
  mkdirSync(dir, { recursive: true });
  const files = new Map<string, WriteStream>();
  // Lines a stopping process flushes after close() go nowhere (not to a reopened file).
  let closed = false;
  const file = (name: string) => join(dir, `${name}.log`);
  const streamOf = (name: string) => {
    let s = files.get(name);
    if (s === undefined) {
      s = createWriteStream(file(name), { flags: "a" });
      // A full disk must not take the cluster down: the files are a convenience.
      s.on("error", () => {});
      files.set(name, s);
    }
    return s;
  };
  const prefixOf = (name: string) => {
    if (!names.includes(name)) names.push(name);
    const width = Math.max(...names.map((n) => n.length));
    const label = name.padEnd(width);
    if (sink === undefined || !sink.color) return `${label} | `;
    const color = COLORS[names.indexOf(name) % COLORS.length];
    return `\u001b[${color}m${label} |\u001b[0m `;
  };
  const emit = (name: string, text: string) => {
    if (closed) return;
    const plain = stripAnsi(text);
    streamOf(name).write(`${plain}\n`);
    if (sink !== undefined) sink.write(`${prefixOf(name)}${sink.color ? text : plain}\n`);
  };
  return {
    dir,
    file,
    attach(name, proc, opts = {}) {
      prefixOf(name);
      streamOf(name);
      if (opts.replay) {
        for (const line of proc.output().split("\n")) if (line.trim() !== "") emit(name, line);
      }
      for (const stream of [proc.child.stdout, proc.child.stderr]) {
        if (stream === null) continue;
        let partial = "";
        stream.on("data", (chunk: Buffer) => {
          const lines = (partial + chunk.toString("utf8")).split("\n");
          partial = lines.pop() ?? "";
          for (const line of lines) emit(name, line.replace(/\r$/, ""));
        });
        stream.on("end", () => {
          if (partial !== "") emit(name, partial);
          partial = "";
        });
      }
    },
    async close() {
      closed = true;
      await Promise.all(
        [...files.values()].map((s) => new Promise<void>((resolve) => s.end(() => resolve()))),
      );
      files.clear();
    },
  };
}
