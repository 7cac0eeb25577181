// "Durable before it leaves the region" (DESIGN §4), for every path a loan or
// a return can take out: the grant/return of this round, and the record the
// daemon reads back from Redis in any later round (every `g|` / `r|` field),
// after a restart included. The ledger remembers, per key and per loan or
// return register, the highest `seq` a successful durability wait covered;
// what a read returns beyond that is shipped only after a wait that started
// after the read succeeds. Pure bookkeeping: the wait itself is the store's
// (`DaemonStore.waitDurable`, WAIT on Redis). Forgetting an entry (bound,
// restart) only costs one more wait, never an unsafe shipment.
import { KeyRecord } from "@geoquota/crdt";

type Kind = "loan" | "return";

export class DurableLedger {
  /** key → `<kind>:<lender>><borrower>` → highest durable seq. */
  private readonly seqs = new Map<string, Map<string, number>>();

  constructor(private readonly maxKeys = 100_000) {}

  private entry(key: string): Map<string, number> {
    let m = this.seqs.get(key);
    if (!m) {
      if (this.seqs.size >= this.maxKeys) this.seqs.clear();
      m = new Map();
      this.seqs.set(key, m);
    }
    return m;
  }

  private covered(key: string, kind: Kind, id: string, seq: number): boolean {
    return (this.seqs.get(key)?.get(`${kind}:${id}`) ?? -1) >= seq;
  }

  /** A durability wait that started after this loan/return was written succeeded. */
  mark(key: string, kind: Kind, id: string, seq: number): void {
    const m = this.entry(key);
    const k = `${kind}:${id}`;
    if ((m.get(k) ?? -1) < seq) m.set(k, seq);
  }

  /** True when `record` holds a loan or return no successful wait covered yet. */
  pending(key: string, record: KeyRecord): boolean {
    for (const [id, loan] of record.loans) if (!this.covered(key, "loan", id, loan.seq)) return true;
    for (const [id, mark] of record.returned) if (!this.covered(key, "return", id, mark.seq)) return true;
    return false;
  }

  /** Every loan and return of `record` (read before a wait that succeeded) is durable. */
  certify(key: string, record: KeyRecord): void {
    for (const [id, loan] of record.loans) this.mark(key, "loan", id, loan.seq);
    for (const [id, mark] of record.returned) this.mark(key, "return", id, mark.seq);
  }

  /** `record` without the loans and returns no wait covered (counters are kept; `record` is not changed). */
  durablePart(key: string, record: KeyRecord): KeyRecord {
    if (!this.pending(key, record)) return record;
    const out = KeyRecord.copy(record);
    for (const [id, loan] of record.loans) if (!this.covered(key, "loan", id, loan.seq)) out.loans.delete(id);
    for (const [id, mark] of record.returned) {
      if (!this.covered(key, "return", id, mark.seq)) out.returned.delete(id);
    }
    return out;
  }
}
