// A simulated message network over a SimClock. Generic in the message type so
// the CRDT tests and the gossip daemon's whole-protocol simulation share it.
// Faults: drop, duplicate, reorder (via random latency), delay, partition
// (both ways or one way) and heal. All randomness comes from the injected Rng.
import type { SimClock } from "./clock.js";
import { type LatencyUs, latency } from "./latency.js";
import type { Rng } from "./prng.js";

export interface LinkConfig {
  /** Probability a message is lost. */
  dropRate: number;
  /** Probability a delivered message is delivered a second time (independent delay). */
  duplicateRate: number;
  latencyUs: LatencyUs;
}

export type Handler<M> = (from: string, msg: M) => void;

export interface NetworkStats {
  sent: number;
  delivered: number;
  dropped: number;
  duplicated: number;
  /** Lost to a partition (at send or while in flight). */
  blocked: number;
}

export interface SimNetworkOptions {
  clock: SimClock;
  rng: Rng;
  defaultLink?: Partial<LinkConfig>;
}

const DEFAULT_LINK: LinkConfig = {
  dropRate: 0,
  duplicateRate: 0,
  latencyUs: latency.uniform(1_000, 5_000),
};

function linkId(from: string, to: string): string {
  return `${from}\u0000${to}`;
}

export class SimNetwork<M> {
  private readonly clock: SimClock;
  private readonly rng: Rng;
  private readonly handlers = new Map<string, Handler<M>>();
  private readonly links = new Map<string, LinkConfig>();
  /** Directed links currently cut: a message from→to is lost. */
  private readonly cut = new Set<string>();
  private defaultLink: LinkConfig;
  private inFlightCount = 0;
  readonly stats: NetworkStats = { sent: 0, delivered: 0, dropped: 0, duplicated: 0, blocked: 0 };

  constructor(opts: SimNetworkOptions) {
    this.clock = opts.clock;
    this.rng = opts.rng;
    this.defaultLink = { ...DEFAULT_LINK, ...opts.defaultLink };
  }

  get nodes(): string[] {
    return [...this.handlers.keys()];
  }

  /** Messages scheduled for delivery and not yet delivered or lost. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  addNode(id: string, handler: Handler<M>): void {
    if (this.handlers.has(id)) throw new Error(`SimNetwork: node ${id} already added`);
    this.handlers.set(id, handler);
  }

  /** Replaces a node's handler (e.g. a restarted node with fresh state). */
  setHandler(id: string, handler: Handler<M>): void {
    if (!this.handlers.has(id)) throw new Error(`SimNetwork: unknown node ${id}`);
    this.handlers.set(id, handler);
  }

  /** Sets the defaults for links without their own config. */
  setDefaultLink(cfg: Partial<LinkConfig>): void {
    this.defaultLink = { ...this.defaultLink, ...cfg };
  }

  /** Configures the directed link from→to (merged over the current config). */
  setLink(from: string, to: string, cfg: Partial<LinkConfig>): void {
    this.links.set(linkId(from, to), { ...this.link(from, to), ...cfg });
  }

  link(from: string, to: string): LinkConfig {
    return this.links.get(linkId(from, to)) ?? this.defaultLink;
  }

  /** Cuts from→to only (a one-directional partition). */
  cutLink(from: string, to: string): void {
    this.cut.add(linkId(from, to));
  }

  healLink(from: string, to: string): void {
    this.cut.delete(linkId(from, to));
  }

  /** Cuts every link between the two groups; oneWay cuts only a→b. */
  partition(a: readonly string[], b: readonly string[], opts: { oneWay?: boolean } = {}): void {
    for (const x of a) {
      for (const y of b) {
        if (x === y) continue;
        this.cutLink(x, y);
        if (opts.oneWay !== true) this.cutLink(y, x);
      }
    }
  }

  /** Cuts a node off from everyone else, both ways. */
  isolate(id: string): void {
    this.partition(
      [id],
      this.nodes.filter((n) => n !== id),
    );
  }

  /** Removes every partition (link fault rates stay as configured). */
  heal(): void {
    this.cut.clear();
  }

  isCut(from: string, to: string): boolean {
    return this.cut.has(linkId(from, to));
  }

  /** Sends msg; delivery (or loss) happens later on the clock. */
  send(from: string, to: string, msg: M): void {
    if (!this.handlers.has(to)) throw new Error(`SimNetwork: send to unknown node ${to}`);
    this.stats.sent++;
    if (this.isCut(from, to)) {
      this.stats.blocked++;
      return;
    }
    const cfg = this.link(from, to);
    if (this.rng.chance(cfg.dropRate)) {
      this.stats.dropped++;
      return;
    }
    this.schedule(from, to, msg, cfg);
    if (this.rng.chance(cfg.duplicateRate)) {
      this.stats.duplicated++;
      this.schedule(from, to, msg, cfg);
    }
  }

  private schedule(from: string, to: string, msg: M, cfg: LinkConfig): void {
    const delayUs = Math.max(0, cfg.latencyUs(this.rng));
    this.inFlightCount++;
    this.clock.schedule(delayUs, () => {
      this.inFlightCount--;
      // A partition that starts while a message is in flight loses it too.
      if (this.isCut(from, to)) {
        this.stats.blocked++;
        return;
      }
      const handler = this.handlers.get(to);
      if (handler === undefined) return;
      this.stats.delivered++;
      handler(from, msg);
    });
  }
}
