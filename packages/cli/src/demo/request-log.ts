// Every request the demo sends, kept in memory for the oracle (DESIGN §8):
// sent and answered times on the client's monotonic clock, region, key,
// outcome, cost. Columnar typed arrays so 10⁵ records stay a few MB. The log
// is bounded; when it is full the traffic generator stops sending, because an
// unrecorded admission would blind the oracle.
import type { Admission } from "@geoquota/sim";

export const OUTCOME = { allowed: 1, denied: 2, error: 3 } as const;
export type Outcome = (typeof OUTCOME)[keyof typeof OUTCOME];

export interface RequestRecord {
  readonly sentMs: number;
  readonly answeredMs: number;
  readonly region: number;
  readonly key: number;
  readonly outcome: Outcome;
  readonly cost: number;
}

export class RequestLog {
  readonly capacity: number;
  private readonly sent: Float64Array;
  private readonly answered: Float64Array;
  private readonly region: Uint8Array;
  private readonly key: Uint8Array;
  private readonly outcome: Uint8Array;
  private readonly cost: Float64Array;
  private n = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`RequestLog: bad capacity ${capacity}`);
    this.capacity = capacity;
    this.sent = new Float64Array(capacity);
    this.answered = new Float64Array(capacity);
    this.region = new Uint8Array(capacity);
    this.key = new Uint8Array(capacity);
    this.outcome = new Uint8Array(capacity);
    this.cost = new Float64Array(capacity);
  }

  get size(): number {
    return this.n;
  }

  get full(): boolean {
    return this.n >= this.capacity;
  }

  /** Returns false when full (the caller must not have sent the request: reserve first). */
  push(r: RequestRecord): boolean {
    if (this.n >= this.capacity) return false;
    const i = this.n++;
    this.sent[i] = r.sentMs;
    this.answered[i] = r.answeredMs;
    this.region[i] = r.region;
    this.key[i] = r.key;
    this.outcome[i] = r.outcome;
    this.cost[i] = r.cost;
    return true;
  }

  at(i: number): RequestRecord {
    if (i < 0 || i >= this.n) throw new RangeError(`RequestLog.at(${i}) of ${this.n}`);
    return {
      sentMs: this.sent[i]!,
      answeredMs: this.answered[i]!,
      region: this.region[i]!,
      key: this.key[i]!,
      outcome: this.outcome[i] as Outcome,
      cost: this.cost[i]!,
    };
  }

  *records(): IterableIterator<RequestRecord> {
    for (let i = 0; i < this.n; i++) yield this.at(i);
  }

  /** The oracle's input for one key: admitted requests with their [sent, answered] windows. */
  admissions(key: number): Admission[] {
    const out: Admission[] = [];
    for (let i = 0; i < this.n; i++) {
      if (this.key[i] === key && this.outcome[i] === OUTCOME.allowed)
        out.push({ sentMs: this.sent[i]!, answeredMs: this.answered[i]!, cost: this.cost[i]! });
    }
    return out;
  }
}
