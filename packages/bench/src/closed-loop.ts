// Closed-loop driver: `inFlight` workers each issue one operation at a time,
// so exactly that many are outstanding. Bounded by time and by count.
import { Histogram } from "./histogram.js";

export interface ClosedLoopOptions {
  readonly inFlight: number;
  readonly durationMs: number;
  /** Hard cap on operations, whatever the speed. */
  readonly maxOps: number;
  /** The operation; `i` is its global sequence number (pick a key from it). */
  readonly op: (i: number) => Promise<unknown>;
}

export interface ClosedLoopResult {
  readonly ops: number;
  readonly elapsedMs: number;
  readonly opsPerSecond: number;
  readonly hist: Histogram;
}

export async function runClosedLoop(o: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const hist = new Histogram();
  let next = 0;
  const start = performance.now();
  const deadline = start + o.durationMs;
  const worker = async () => {
    while (next < o.maxOps) {
      const t = performance.now();
      if (t >= deadline) return;
      const i = next++;
      await o.op(i);
      hist.record((performance.now() - t) * 1000);
    }
  };
  await Promise.all(Array.from({ length: o.inFlight }, worker));
  const elapsedMs = performance.now() - start;
  return { ops: hist.count, elapsedMs, opsPerSecond: hist.count / (elapsedMs / 1000), hist };
}

/** Median of a non-empty list (0 for an empty one). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
