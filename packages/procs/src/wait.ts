/** Polls `probe` until it resolves true, or throws after `timeoutMs`. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await probe()) return;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  const why = lastError instanceof Error ? `: ${lastError.message}` : "";
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}
