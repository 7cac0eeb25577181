// A load generator in a child process (off the measured server's event loop): runs
// `runner` (a plain .mjs beside this file) with one JSON argument and reads the one
// JSON line it prints. Killed 30 s past the run's own duration.
import { execFile } from "node:child_process";

export function runChild<T>(what: string, runner: string, args: unknown, durationS: number): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [runner, JSON.stringify(args)],
      { timeout: (durationS + 30) * 1000, maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${what}: ${err.message}\n${stderr}`));
        try {
          resolve(JSON.parse(stdout) as T);
        } catch {
          reject(new Error(`${what}: bad output ${stdout.slice(0, 200)}`));
        }
      },
    );
  });
}
