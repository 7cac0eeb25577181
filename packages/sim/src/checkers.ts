// End-of-run checkers. They return a result instead of throwing so a test can
// assert that a deliberately broken system makes them fail (the oracle must
// not be vacuous); `assertCheck` turns a failure into an error.

export type CheckResult = { ok: true } | { ok: false; message: string };

export interface StateCompare<S> {
  equals(a: S, b: S): boolean;
  /** Short rendering for failure messages. */
  describe?: (s: S) => string;
}

const DESCRIBE_MAX = 400;

function render<S>(cmp: StateCompare<S>, s: S): string {
  const text = cmp.describe !== undefined ? cmp.describe(s) : String(s);
  return text.length > DESCRIBE_MAX ? `${text.slice(0, DESCRIBE_MAX)}…` : text;
}

/** All replicas hold equal states. */
export function checkConvergence<S>(
  states: ReadonlyMap<string, S> | ReadonlyArray<readonly [string, S]>,
  cmp: StateCompare<S>,
): CheckResult {
  const list = [...states];
  const first = list[0];
  if (first === undefined) return { ok: true };
  for (const [id, s] of list.slice(1)) {
    if (!cmp.equals(first[1], s)) {
      return {
        ok: false,
        message: `replicas ${first[0]} and ${id} did not converge:\n  ${first[0]}: ${render(cmp, first[1])}\n  ${id}: ${render(cmp, s)}`,
      };
    }
  }
  return { ok: true };
}

/** Every replica equals the expected state (e.g. the join of every update ever made). */
export function checkAgainstOracle<S>(
  states: ReadonlyMap<string, S> | ReadonlyArray<readonly [string, S]>,
  expected: S,
  cmp: StateCompare<S>,
): CheckResult {
  for (const [id, s] of states) {
    if (!cmp.equals(s, expected)) {
      return {
        ok: false,
        message: `replica ${id} differs from the oracle:\n  got:      ${render(cmp, s)}\n  expected: ${render(cmp, expected)}`,
      };
    }
  }
  return { ok: true };
}

/** Runs several checks, returning the first failure. */
export function checkAll(...results: CheckResult[]): CheckResult {
  for (const r of results) if (!r.ok) return r;
  return { ok: true };
}

export class CheckFailure extends Error {
  override readonly name = "CheckFailure";
}

export function assertCheck(result: CheckResult): void {
  if (!result.ok) throw new CheckFailure(result.message);
}
