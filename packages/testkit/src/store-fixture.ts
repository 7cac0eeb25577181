// The fixtures the Redis-store tests of several packages share (they lived in
// packages/redis/test/redis-helpers.ts, which the limiter's tests reached into):
// a policy on a fresh tenant, the test timing, a receipt reference, sleep. Their
// types are written out (the test kit imports no geoquota package but the spawners
// and the oracle) and are assignable to @geoquota/core's KeyPolicy, Timing and
// RefundReceiptRef.
import { keyPolicy, type PolicyFixture } from "./policy-fixture.js";

/** The timing the store tests run at: ε 250 ms, loans of 3 s. */
export const TIMING: { readonly epsilonUs: number; readonly loanDurationUs: number } = {
  epsilonUs: 250_000,
  loanDurationUs: 3_000_000,
};

let n = 0;
/** A policy on a fresh tenant (tests never share keys). */
export function policy<A extends string = "token_bucket">(
  limit: Partial<PolicyFixture<A>["limit"]> = {},
  shares: { base?: number; floor?: number } = {},
): PolicyFixture<A> {
  n += 1;
  const p = keyPolicy<A>({
    tenant: `t${process.pid}x${n}`,
    ...(shares.base !== undefined ? { baseShare: shares.base } : {}),
    ...(shares.floor !== undefined ? { floorShare: shares.floor } : {}),
  });
  return { ...p, limit: { ...p.limit, ...limit } };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let receipts = 0;
/**
 * A fresh receipt reference for `store.refund` (what the limiter takes from a verified
 * receipt): admitted at `admittedUs` (default: the host clock, which Redis TIME shares in
 * these tests), refundable for a minute.
 */
export function receiptRef(admittedUs = Date.now() * 1000): {
  readonly id: string;
  readonly admittedUs: number;
  readonly expiresUs: number;
} {
  receipts += 1;
  return { id: `r${process.pid}x${receipts}`, admittedUs, expiresUs: admittedUs + 60_000_000 };
}
