/**
 * Exponential backoff with full jitter (AWS architecture blog, "Exponential
 * Backoff and Jitter"): delay = random · min(cap, base · 2^attempt). Full
 * jitter spreads the redials of regions that lost the same peer at the same
 * instant. `random` is injected so tests can pin it.
 */
export function backoffDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  // 2^31 already exceeds any cap; clamping the exponent keeps the math finite.
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 31));
  return Math.floor(random() * ceiling);
}
