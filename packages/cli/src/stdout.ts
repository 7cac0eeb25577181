// A reader that goes away (`geoquota policy status | head -1`) closes the
// pipe behind stdout: the next write fails with EPIPE, which Node reports as
// an 'error' event and, unhandled, as a stack trace and exit 1. Here the CLI
// stops quietly instead: a command that must clean up (the local cluster
// stops its processes) registers what to do; any other command exits with
// the code it has set so far (0 by default), as `head` expects of a writer.

type Closer = () => void;
const closers = new Set<Closer>();
let closed = false;

/** Whether stdout's reader has gone (further output is dropped). */
export function stdoutClosed(): boolean {
  return closed;
}

/** Runs `fn` instead of exiting when stdout's reader goes; returns the unregistration. */
export function onStdoutClosed(fn: Closer): () => void {
  closers.add(fn);
  return () => {
    closers.delete(fn);
  };
}

/** Installs the handler on `stream` (process.stdout). */
export function guardStdout(stream: NodeJS.WriteStream = process.stdout): void {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE" && err.code !== "ERR_STREAM_DESTROYED") {
      process.stderr.write(`geoquota: stdout: ${err.message}\n`);
      process.exit(1);
    }
    if (closed) return;
    closed = true;
    if (closers.size === 0) process.exit(typeof process.exitCode === "number" ? process.exitCode : 0);
    for (const fn of closers) fn();
  });
}
