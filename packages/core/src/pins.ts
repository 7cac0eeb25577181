// Process leases pin share (DESIGN §3): tokens handed to in-process clients
// stay spendable until the lease expires, whatever happens to the share, so
// no script may lower the share below what backs them. Per region, at every
// instant t from now to the last lease expiry, with the share schedule as the
// records stand:  outstanding(t) ≤ C·s(t)/U  (the bucket's own tokens are
// clamped to C·s(t)/U − outstanding(t) at every piece, so then
// outstanding + max(tokens, 0) ≤ C·s(t)/U too). Mirrors lua/lib/schedule.lua pins_hold.
import { leaseBreakpoints, outstandingAt, type ShareInputs, shareAt, shareBreakpoints } from "./share.js";
import { type LeaseHold, SHARE_UNITS } from "./types.js";

/**
 * Whether the share schedule `inp` backs every lease outstanding at or after
 * `nowUs`, checked at now and at every instant where the share or the leased
 * amount changes before the last expiry (the order of the checks does not
 * matter: all must hold).
 */
export function pinsHold(
  inp: ShareInputs,
  leases: readonly LeaseHold[],
  capacity: number,
  nowUs: number,
): boolean {
  let lastExpiryUs = Number.NEGATIVE_INFINITY;
  for (const l of leases) if (l.expiryUs > nowUs && l.expiryUs > lastExpiryUs) lastExpiryUs = l.expiryUs;
  if (lastExpiryUs === Number.NEGATIVE_INFINITY) return true;
  const backed = (t: number) => (capacity * shareAt(inp, t)) / SHARE_UNITS - outstandingAt(leases, t) >= 0;
  if (!backed(nowUs)) return false;
  for (const t of shareBreakpoints(inp, nowUs, lastExpiryUs))
    if (t < lastExpiryUs && !backed(t)) return false;
  for (const t of leaseBreakpoints(leases, nowUs, lastExpiryUs))
    if (t < lastExpiryUs && !backed(t)) return false;
  return true;
}

/**
 * The per-region invariant as a number (for tests): the largest
 * outstanding(t) − C·s(t)/U over now and every later change point of the
 * schedule `inp` until the last lease expiry; ≤ 0 when the leases are backed.
 */
export function pinExcess(
  inp: ShareInputs,
  leases: readonly LeaseHold[],
  capacity: number,
  nowUs: number,
): number {
  let worst = outstandingAt(leases, nowUs) - (capacity * shareAt(inp, nowUs)) / SHARE_UNITS;
  for (const t of [...shareBreakpoints(inp, nowUs), ...leaseBreakpoints(leases, nowUs)]) {
    const e = outstandingAt(leases, t) - (capacity * shareAt(inp, t)) / SHARE_UNITS;
    if (e > worst) worst = e;
  }
  return worst;
}
