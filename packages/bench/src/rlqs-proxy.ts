// The proxies of section 11 (RLQS): an in-process one, which enforces each assignment as
// Envoy's rate_limit_quota filter does (and as .bin/rlqs-client's `decide` does) — a token
// bucket that starts full at the assignment's receipt, one fill of `tokens_per_fill` every
// `fill_interval` up to `max_tokens`, a blanket rule, or a denial once the TTL ran out or
// before any assignment — over one StreamRateLimitQuotas stream of @grpc/grpc-js, reporting
// its usage every `reportMs`; and .bin/rlqs-client itself (Envoy's generated Go types), run as
// a child process whose JSON lines are read back.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "@geoquota/procs";
import { type RlqsAction, type RlqsReports, type RlqsResponse, rlqsApi } from "@geoquota/rls";
import * as grpc from "@grpc/grpc-js";

/** The local bucket of one assignment, times in ms (performance.now()). */
export class LocalBucket {
  private live = false;
  private blanket: "ALLOW_ALL" | "DENY_ALL" | undefined;
  private expiresMs = 0;
  private max = 0;
  private perFill = 1;
  private fillMs = 0;
  private tokens = 0;
  private lastFillMs = 0;

  /** Installs an action received at `nowMs`; returns its kind (token_bucket, a blanket rule, abandon). */
  apply(a: RlqsAction, nowMs: number): string {
    if ("abandon_action" in a && a.abandon_action != null) {
      this.live = false;
      return "abandon";
    }
    const q = (a as Extract<RlqsAction, { quota_assignment_action: unknown }>).quota_assignment_action;
    const ttl = q.assignment_time_to_live;
    this.live = true;
    this.expiresMs = nowMs + ttl.seconds * 1000 + ttl.nanos / 1e6;
    this.lastFillMs = nowMs;
    const s = q.rate_limit_strategy;
    if ("token_bucket" in s && s.token_bucket != null) {
      const tb = s.token_bucket;
      this.blanket = undefined;
      this.max = tb.max_tokens;
      this.perFill = tb.tokens_per_fill?.value ?? 1;
      this.fillMs = tb.fill_interval.seconds * 1000 + tb.fill_interval.nanos / 1e6;
      // Each assignment starts its bucket full (DESIGN §11: a renewal is a fresh burst).
      this.tokens = this.max;
      return "token_bucket";
    }
    this.blanket = (s as { blanket_rule: "ALLOW_ALL" | "DENY_ALL" }).blanket_rule;
    return this.blanket;
  }

  /** One request's decision at `nowMs`. */
  decide(nowMs: number): boolean {
    if (!this.live) return false;
    if (nowMs >= this.expiresMs) {
      this.live = false;
      return false;
    }
    if (this.blanket !== undefined) return this.blanket === "ALLOW_ALL";
    if (this.fillMs > 0) {
      // Whole fill intervals since the last fill, the bucket never above max_tokens.
      const n = Math.floor((nowMs - this.lastFillMs) / this.fillMs);
      if (n > 0) {
        this.tokens = Math.min(this.max, this.tokens + n * this.perFill);
        this.lastFillMs += n * this.fillMs;
      }
    }
    if (this.tokens <= 0) return false;
    this.tokens -= 1;
    return true;
  }
}

const duration = (ms: number) => {
  const ns = Math.max(0, Math.round(ms * 1e6));
  return { seconds: Math.floor(ns / 1e9), nanos: ns % 1e9 };
};

/** One proxy's stream, one bucket: decide() is the in-process decision. */
export class InProcessRlqsProxy {
  allowed = 0;
  denied = 0;
  /** Assignments (token buckets and blanket rules) received, with their receipt times. */
  readonly assignmentsAtMs: number[] = [];
  private readonly bucket = new LocalBucket();
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<RlqsReports, RlqsResponse>;
  private readonly timer: NodeJS.Timeout;
  private readonly ended: Promise<void>;
  /** The counts the last report covered (cumulative). */
  private reported = { allowed: 0, denied: 0 };
  private lastReportMs = performance.now();
  private firstAssignment: (() => void) | undefined;
  private readonly first: Promise<void>;

  constructor(
    address: string,
    private readonly domain: string,
    private readonly entries: Readonly<Record<string, string>>,
    reportMs: number,
  ) {
    this.client = new (rlqsApi().Client)(address, grpc.credentials.createInsecure());
    const open = (this.client as unknown as Record<string, () => typeof this.call>).StreamRateLimitQuotas!;
    this.call = open.call(this.client);
    this.first = new Promise<void>((r) => {
      this.firstAssignment = r;
    });
    this.call.on("data", (m: RlqsResponse) => {
      const now = performance.now();
      for (const a of m.bucket_action) {
        if (this.bucket.apply(a, now) !== "abandon") {
          this.assignmentsAtMs.push(now);
          this.firstAssignment?.();
        }
      }
    });
    this.ended = new Promise<void>((r) => {
      this.call.on("status", () => r());
      this.call.on("error", () => r());
    });
    this.report(); // the first report subscribes the bucket
    this.timer = setInterval(() => this.report(), reportMs);
  }

  /** Resolves at the first assignment (rejects after `ms`). */
  async ready(ms = 10_000): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, rej) => {
      t = setTimeout(() => rej(new Error(`rlqs proxy: no assignment within ${ms} ms`)), ms);
    });
    try {
      await Promise.race([this.first, late]);
    } finally {
      clearTimeout(t);
    }
  }

  /** One request's decision through the local bucket (reads the clock, as a filter does). */
  decide(): boolean {
    const ok = this.bucket.decide(performance.now());
    if (ok) this.allowed++;
    else this.denied++;
    return ok;
  }

  private report(): void {
    const now = performance.now();
    const allowed = this.allowed - this.reported.allowed;
    const denied = this.denied - this.reported.denied;
    this.reported = { allowed: this.allowed, denied: this.denied };
    this.call.write({
      domain: this.domain,
      bucket_quota_usages: [
        {
          bucket_id: { bucket: Object.entries(this.entries).map(([key, value]) => ({ key, value })) },
          time_elapsed: duration(now - this.lastReportMs),
          num_requests_allowed: allowed,
          num_requests_denied: denied,
        },
      ],
    });
    this.lastReportMs = now;
  }

  /** The last report, then a half-close; waits (bounded) for the server to end the stream. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.report();
    this.call.end();
    await Promise.race([this.ended, new Promise((r) => setTimeout(r, 2000))]);
    this.call.cancel();
    this.client.close();
  }
}

/** One line of .bin/rlqs-client: a decision or an action received. */
export interface RlqsClientLine {
  readonly id?: string;
  readonly t_ms: number;
  readonly allowed?: boolean;
  readonly reason?: string;
  readonly assignment?: { readonly kind: string; readonly ttl_ms?: number };
  readonly err?: string;
}

export const RLQS_CLIENT = join(repoRoot, ".bin", "rlqs-client");

/** .bin/rlqs-client deciding `rate` requests/s of one bucket for `forMs`, its lines parsed. */
export function runRlqsClient(o: {
  readonly addr: string;
  readonly bucket: string;
  readonly rate: number;
  readonly forMs: number;
  readonly reportMs: number;
  readonly epoch: number;
  readonly id: string;
}): Promise<RlqsClientLine[]> {
  const args = [
    ...["-addr", o.addr, "-domain", "geoquota", "-bucket", o.bucket],
    ...["-rate", String(o.rate), "-for", `${o.forMs}ms`, "-report", `${o.reportMs}ms`],
    ...["-epoch", String(o.epoch), "-id", o.id],
  ];
  return new Promise((resolve, reject) => {
    execFile(RLQS_CLIENT, args, { timeout: o.forMs + 30_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const hint = "code" in err && err.code === "ENOENT" ? " (bash scripts/bootstrap.sh builds it)" : "";
        return reject(new Error(`${RLQS_CLIENT}${hint}: ${err.message}\n${stderr}`));
      }
      resolve(
        stdout
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as RlqsClientLine),
      );
    });
  });
}
