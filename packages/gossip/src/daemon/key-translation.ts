// The one translation between a key's Redis view (what the inspect script
// and the model Redis report, counters by kind) and the CRDT record gossip
// ships, used by the daemon's Redis adapter (redis-port.ts) and by the
// simulation's store. Pure: no Redis, no clock but the view's own nowUs.
import { KeyRecord, type Loan } from "@geoquota/crdt";
import { type LoanRecord, loanOutstanding, loanUsable, SHARE_UNITS } from "@geoquota/core";
import { type CounterSets, counterFieldsOf } from "@geoquota/redis";
import type { InboundLoan } from "../policy/index.js";
import type { KeyReading } from "./store-port.js";

/** What a region's Redis holds for one key, as the store reads it (KeyStateView's gossip part). */
export interface RedisKeyView {
  readonly nowUs: number;
  readonly recovering: boolean;
  readonly counters: CounterSets;
  /** Latest grant per borrower (`g|`). */
  readonly granted: readonly LoanRecord[];
  /** Highest returned seq per lender (`r|`). */
  readonly returned: Readonly<Record<string, number>>;
  /** Staircase entries still reserved (`o|`). */
  readonly loansOut: readonly LoanRecord[];
  /** Highest-seq loan per lender (`i|`). */
  readonly loansIn: readonly LoanRecord[];
  /** Leases and RLQS assignments by id; an assignment also holds `shareUnits` of share. */
  readonly leases: Readonly<
    Record<
      string,
      { readonly tokens: number; readonly expiryUs: number; readonly shareUnits?: number | undefined }
    >
  >;
}

/** The daemon's view of a key from its Redis view (`capacity`: the key's C, for the lease pin). */
export function keyStateOf(
  region: string,
  epsilonUs: number,
  capacity: number,
  v: RedisKeyView,
): Omit<KeyReading, "readTicket"> {
  const now = v.nowUs;
  const record = KeyRecord.initial();
  for (const [replica, n] of Object.entries(v.counters.admitted)) record.consumed.p.set(replica, n);
  for (const [replica, n] of Object.entries(v.counters.refunded)) record.consumed.n.set(replica, n);
  for (const [replica, n] of Object.entries(v.counters.denied)) record.denied.set(replica, n);
  const current: Record<string, number> = {};
  for (const g of v.granted) {
    const loan: Loan = { ...g, lender: region };
    record.loans.set(`${region}>${g.borrower}`, loan);
    if (loanOutstanding(g, now, epsilonUs)) current[g.borrower] = g.units;
  }
  for (const [lender, seq] of Object.entries(v.returned)) {
    record.returned.set(`${lender}>${region}`, { lender, borrower: region, seq });
  }
  const reserved: Record<string, number> = {};
  for (const o of v.loansOut) {
    if (loanOutstanding(o, now, epsilonUs))
      reserved[o.borrower] = Math.max(reserved[o.borrower] ?? 0, o.units);
  }
  const inUse: InboundLoan[] = [];
  for (const l of v.loansIn) {
    if (loanUsable(l, v.returned[l.lender] ?? 0, now, epsilonUs)) {
      inUse.push({ lender: l.lender, units: l.units, seq: l.seq });
    }
  }
  // What the region may not lend or return (the scripts' pins_hold): the share its leased tokens
  // need, plus the share live RLQS assignments hold (their rate is the proxy's until they end).
  let leased = 0;
  let assigned = 0;
  for (const l of Object.values(v.leases)) {
    if (!(now < l.expiryUs)) continue;
    leased += l.tokens;
    assigned += l.shareUnits ?? 0;
  }
  const tokensPpm = leased > 0 && capacity > 0 ? Math.ceil((SHARE_UNITS * leased) / capacity) : 0;
  const leasePinnedPpm = Math.min(SHARE_UNITS, tokensPpm + assigned);
  return { nowUs: now, recovering: v.recovering, record, reserved, current, inUse, leasePinnedPpm };
}

/** What a remote record merges into this region's Redis: the loans addressed here and every counter field. */
export function mergeOf(
  region: string,
  record: KeyRecord,
): { loans: LoanRecord[]; counterFields: Record<string, number> } {
  const loans: LoanRecord[] = [];
  for (const loan of record.loans.values()) if (loan.borrower === region) loans.push(loan);
  const counterFields = counterFieldsOf({
    admitted: Object.fromEntries(record.consumed.p),
    refunded: Object.fromEntries(record.consumed.n),
    denied: Object.fromEntries(record.denied),
  });
  return { loans, counterFields };
}
