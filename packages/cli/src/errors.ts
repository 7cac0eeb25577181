/** A usage or configuration error: the CLI prints the message and exits 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
}

/** Parses `60s`, `2m`, `1500ms` or a bare number of seconds into milliseconds. */
export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!m) throw new UsageError(`${flag}: expected a duration like 90s, 2m or 1500ms, got "${text}"`);
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  const ms = unit === "ms" ? n : unit === "s" ? n * 1000 : n * 60_000;
  if (!Number.isFinite(ms) || ms <= 0)
    throw new UsageError(`${flag}: expected a positive duration, got "${text}"`);
  return Math.round(ms);
}

export function parseIntFlag(flag: string, text: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(text.trim())) throw new UsageError(`${flag}: expected an integer, got "${text}"`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`${flag}: expected ${min}..${max}, got ${n}`);
  return n;
}
