// Virtual time for simulations. Nothing here reads the wall clock: time moves
// only when the simulation runs an event, so runs are deterministic and fast.

/** What code under test needs from a clock; inject a SimClock in tests. */
export interface Clock {
  nowUs(): number;
  nowMs(): number;
}

export type EventId = number;

interface ScheduledEvent {
  atUs: number;
  /** Insertion order: ties in time run first-scheduled-first, deterministically. */
  order: number;
  id: EventId;
  fn: () => void;
}

/** A virtual clock with a min-heap of scheduled callbacks. */
export class SimClock implements Clock {
  private timeUs: number;
  private readonly heap: ScheduledEvent[] = [];
  private readonly cancelled = new Set<EventId>();
  private nextOrder = 0;
  private nextId = 1;
  /** Events executed so far (a cheap progress/liveness measure). */
  executed = 0;

  constructor(startUs = 0) {
    this.timeUs = startUs;
  }

  nowUs(): number {
    return this.timeUs;
  }

  nowMs(): number {
    return this.timeUs / 1000;
  }

  /** Number of scheduled, not yet run (or cancelled) events. */
  get pending(): number {
    return this.heap.length - this.cancelled.size;
  }

  /** Runs fn after delayUs (≥ 0) of virtual time. */
  schedule(delayUs: number, fn: () => void): EventId {
    if (!(delayUs >= 0) || !Number.isFinite(delayUs)) {
      throw new RangeError(`SimClock.schedule needs a finite delay >= 0, got ${delayUs}`);
    }
    return this.at(this.timeUs + delayUs, fn);
  }

  /** Runs fn at absolute virtual time atUs (clamped to now: time never goes back). */
  at(atUs: number, fn: () => void): EventId {
    const id = this.nextId++;
    this.push({ atUs: Math.max(atUs, this.timeUs), order: this.nextOrder++, id, fn });
    return id;
  }

  cancel(id: EventId): void {
    if (this.heap.some((e) => e.id === id)) this.cancelled.add(id);
  }

  /** Moves time forward without running anything scheduled before the target (use runUntil for that). */
  advanceTo(atUs: number): void {
    if (atUs > this.timeUs) this.timeUs = atUs;
  }

  /** Runs the earliest event. Returns false when nothing is scheduled. */
  step(): boolean {
    for (;;) {
      const ev = this.pop();
      if (ev === undefined) return false;
      if (this.cancelled.delete(ev.id)) continue;
      this.timeUs = ev.atUs;
      this.executed++;
      ev.fn();
      return true;
    }
  }

  /**
   * Runs every event scheduled at or before untilUs, then sets time to untilUs.
   * maxEvents bounds a run that keeps rescheduling itself (a livelock is a bug
   * the caller should see, so exceeding it throws).
   */
  runUntil(untilUs: number, maxEvents = 10_000_000): void {
    let n = 0;
    for (;;) {
      const top = this.peekLive();
      if (top === undefined || top.atUs > untilUs) break;
      if (++n > maxEvents) throw new Error(`SimClock.runUntil exceeded ${maxEvents} events`);
      this.step();
    }
    this.advanceTo(untilUs);
  }

  /** Runs for durationUs of virtual time from now. */
  runFor(durationUs: number, maxEvents?: number): void {
    this.runUntil(this.timeUs + durationUs, maxEvents);
  }

  /** Runs until no event is left; returns the number of events run. */
  runUntilIdle(maxEvents = 10_000_000): number {
    let n = 0;
    while (this.step()) {
      if (++n > maxEvents) throw new Error(`SimClock.runUntilIdle exceeded ${maxEvents} events`);
    }
    return n;
  }

  private peekLive(): ScheduledEvent | undefined {
    for (;;) {
      const top = this.heap[0];
      if (top === undefined || !this.cancelled.has(top.id)) return top;
      this.cancelled.delete(top.id);
      this.pop();
    }
  }

  private static less(x: ScheduledEvent, y: ScheduledEvent): boolean {
    return x.atUs < y.atUs || (x.atUs === y.atUs && x.order < y.order);
  }

  private push(ev: ScheduledEvent): void {
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = h[p] as ScheduledEvent;
      if (!SimClock.less(ev, parent)) break;
      h[i] = parent;
      i = p;
    }
    h[i] = ev;
  }

  private pop(): ScheduledEvent | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      let c = l;
      if (r < h.length && SimClock.less(h[r] as ScheduledEvent, h[l] as ScheduledEvent)) c = r;
      const child = h[c] as ScheduledEvent;
      if (!SimClock.less(child, last)) break;
      h[i] = child;
      i = c;
    }
    h[i] = last;
    return top;
  }
}
