// Region config file `regions/<id>.json`: everything one region's limiter and
// gossip daemon need. Defaults follow DESIGN §3/§6/§7.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { endpointSchema, ID_MESSAGE, idSchema, intIn, listenSchema, SHARE_UNITS } from "./common.js";
import { ConfigError, issuesOf } from "./errors.js";
import { resolveSecret, SecretRefSchema } from "./secrets.js";

const breakerSchema = z
  .strictObject({
    /** Consecutive failures (errors or timeouts) that open the breaker. */
    failureThreshold: intIn(1, 1000).default(5),
    /** How long the breaker stays open before it lets probes through. */
    openMs: intIn(10, 600_000).default(1000),
    /** Probes allowed in flight while half-open. */
    halfOpenProbes: intIn(1, 100).default(1),
    /** Successful probes that close it again. */
    closeAfterSuccesses: intIn(1, 100).default(2),
  })
  .default({ failureThreshold: 5, openMs: 1000, halfOpenProbes: 1, closeAfterSuccesses: 2 });

/**
 * `leased.maxBatch` when the config leaves it out: rate sizing is the default (issue 24
 * point 4), up to 100 batches per acquire, at most the 1e6 any batch may be (so it is never
 * below `batch`). With the defaults (batch 50, durationMs 2000) a key is sized up to 5000
 * tokens per acquire: one acquire a second serves it up to 5000 decisions/s per process
 * before the ceiling binds (past it, acquires grow with the rate: rate ÷ 5000 a second).
 * The ceiling also sets what one process may hold per key (2·maxBatch + lowWater,
 * `leasedHeldBound`): a key is sized from its own rate (≈ durationMs / 2 of it), so a slow
 * key still holds about a batch; only keys hotter than the ceiling's rate hold that much.
 */
export function defaultLeasedMaxBatch(batch: number): number {
  return Math.min(1_000_000, 100 * batch);
}

const leasedSchema = z
  .strictObject({
    /** Serve /v1/check from in-process leases (seed §5.2) instead of one Redis call per check. */
    enabled: z.boolean().default(false),
    batch: intIn(1, 1_000_000).default(50),
    lowWater: intIn(0, 1_000_000).default(10),
    /**
     * Batch sized from the observed rate (issue 24 point 4): each acquire asks for about
     * `durationMs / 2` worth of the key's rate, at least `batch`, at most this; the low-water
     * mark and a refresh before the lease ends follow the rate too. Absent:
     * `defaultLeasedMaxBatch(batch)` (sizing on); `maxBatch` = `batch` keeps a fixed batch.
     */
    maxBatch: intIn(1, 1_000_000).optional(),
    /** In-process lease duration (the bucket reserves it this long, from Redis TIME). */
    durationMs: intIn(100, 600_000).default(2000),
    /**
     * Safety margin: the client stops using a lease at send time + duration − margin. At least
     * 1 ms: 0 would leave no room for the client's and Redis's clocks to run at different rates.
     */
    marginMs: intIn(1, 60_000).default(100),
    /** At most this many keys hold leases in one process (LRU beyond). */
    maxKeys: intIn(1, 1_000_000).default(10_000),
  })
  .default({ enabled: false, batch: 50, lowWater: 10, durationMs: 2000, marginMs: 100, maxKeys: 10_000 })
  .refine((l) => l.lowWater < l.batch, { message: "expected lowWater < batch", path: ["lowWater"] })
  .refine((l) => l.maxBatch === undefined || l.maxBatch >= l.batch, {
    message: "expected maxBatch ≥ batch (maxBatch = batch keeps a fixed batch)",
    path: ["maxBatch"],
  })
  .refine((l) => l.marginMs < l.durationMs, {
    message: "expected marginMs < durationMs",
    path: ["marginMs"],
  })
  // After the refinements: an absent maxBatch is filled from the batch given (or defaulted).
  .transform((l) => ({ ...l, maxBatch: l.maxBatch ?? defaultLeasedMaxBatch(l.batch) }));

/** The region config's `leased` block, defaults applied. */
export type LeasedConfig = z.output<typeof leasedSchema>;

/** What a region config without a `leased` block gets (leased mode off; the rest its defaults). */
export function leasedDefaults(): LeasedConfig {
  return leasedSchema.parse(undefined);
}

const REFUND_WINDOW_DEFAULT_MS = 60_000;

const refundSchema = z
  .strictObject({
    /**
     * HMAC key of refund receipts; default: derived from sharedSecret (so every region
     * verifies the same receipts and refuses another region's by its region field).
     */
    secret: SecretRefSchema.optional(),
    /** A receipt can be refunded until this long after its admission (Redis TIME). */
    windowMs: intIn(100, 86_400_000).default(REFUND_WINDOW_DEFAULT_MS),
  })
  .default({ windowMs: REFUND_WINDOW_DEFAULT_MS });

/**
 * The Envoy rate limit service (RLS v3, DESIGN §11): a gRPC listener, off when absent.
 * `configs`: envoyproxy/ratelimit YAML files loaded as they are (paths resolve against the
 * config file's directory). `algorithm`: fixed_window (default) counts as envoyproxy/ratelimit
 * does, an epoch-aligned window per unit; token_bucket is geoquota's bucket with capacity
 * `burst` (default requests_per_unit) refilling requests_per_unit per unit. `domain`: the
 * domain whose descriptors name geoquota keys directly (entries `tenant` and `resource`,
 * looked up in the policies file).
 */
/**
 * Envoy's rate limit quota service (RLQS, DESIGN §11, experimental) on the RLS listener, off
 * when absent. Each bucket a proxy reports gets a token bucket for `assignmentTtlMs`, reserved
 * until TTL + `deliveryMarginMs` after the send and re-sent `renewBeforeMs` before the TTL ends.
 * Assignments are sized from the proxy's reported demand (packages/rls/src/rlqs-sizing.ts) and
 * fitted by the script to what the slice has free; `assignmentFraction` is the part of the
 * region's base slice a bucket's first assignment asks for, before its proxy reported demand.
 * A bucket not reported for `silentAfterMs` (or three of its reporting intervals) is not renewed.
 */
const rlqsSchema = z
  .strictObject({
    assignmentTtlMs: intIn(100, 600_000).default(2000),
    deliveryMarginMs: intIn(0, 60_000).default(250),
    renewBeforeMs: intIn(10, 600_000).default(500),
    assignmentFraction: z
      .number({ error: "expected a number in (0, 1]" })
      .gt(0, "expected a number in (0, 1]")
      .max(1, "expected ≤ 1: a part of the region's base slice")
      .default(0.5),
    bucketsPerStreamMax: intIn(1, 100_000).default(1000),
    silentAfterMs: intIn(100, 3_600_000).default(3000),
  })
  .refine((r) => r.renewBeforeMs < r.assignmentTtlMs, {
    message: "expected renewBeforeMs < assignmentTtlMs (the renewal is sent before the TTL ends)",
    path: ["renewBeforeMs"],
  });

const rlsSchema = z
  .strictObject({
    listen: listenSchema,
    configs: z.array(z.string().min(1, "expected a YAML file path")).max(1000).default([]),
    algorithm: z.enum(["fixed_window", "token_bucket"]).default("fixed_window"),
    burst: intIn(1, 4_294_967_295).optional(),
    domain: idSchema.default("geoquota"),
    rlqs: rlqsSchema.optional(),
  })
  .refine((r) => r.burst === undefined || r.algorithm === "token_bucket", {
    message:
      "burst applies to algorithm token_bucket only (a fixed window admits requests_per_unit per unit)",
    path: ["burst"],
  })
  .refine((r) => r.rlqs === undefined || r.algorithm === "token_bucket", {
    message:
      'rlqs needs "algorithm": "token_bucket": an assignment is a token bucket carved from the slice (a fixed window has no rate to carve)',
    path: ["rlqs"],
  });

export const RegionConfigSchema = z
  .strictObject({
    region: idSchema,
    listen: listenSchema,
    redis: z
      .strictObject({
        url: z.string().regex(/^rediss?:\/\/.+/, "expected redis:// or rediss:// URL"),
        /** Per-call timeout: a slower answer counts as a failure for the breaker. */
        timeoutMs: intIn(1, 10_000).default(50),
        /** The URL is one node of a Redis Cluster: connect with a cluster client (slots are discovered). */
        cluster: z.boolean().default(false),
        /**
         * Replicas of the primary (of each master, on a Cluster). Loan grants and
         * early returns leave the region only once all of them acknowledged
         * (WAIT); 0 = no replicas: nothing to wait for, and a failover or a
         * restart from an old snapshot can forget loans (docs/internals.md).
         */
        replicas: intIn(0, 16).default(0),
        /**
         * With replicas: an admitting check or a lease grant is answered only
         * once every replica acknowledged it (WAIT, bounded by timeoutMs; a
         * failed wait counts as a store failure). Off: a failover may forget,
         * and admit again, up to the replication lag plus primaryCheckMs of
         * admissions (docs/internals.md "Durable admissions").
         */
        durableAdmissions: z.boolean().default(true),
        /** Failover detection window: how often `master_replid` is polled (limiter and daemon). */
        primaryCheckMs: intIn(10, 60_000).default(1000),
        /**
         * Micro-batching of checks (off when absent): concurrent checks of this process go to
         * Redis as one script call per connection (per shard on a Cluster), sent once
         * `maxChecks` wait or `maxWaitUs` after the first; each decision is still the check
         * script's, in arrival order, and durable admissions hold per batch.
         */
        batch: z
          .strictObject({
            maxChecks: intIn(2, 1024).default(64),
            maxWaitUs: intIn(50, 100_000).default(500),
          })
          .optional(),
      })
      .strict(),
    regions: z
      .array(z.strictObject({ id: idSchema, gossip: endpointSchema }))
      .min(1, "expected at least one region")
      .max(64, "expected at most 64 regions"),
    gossip: z.strictObject({
      listen: listenSchema,
      /** The daemon's HTTP endpoint: /healthz, /readyz, /metrics, /v1/status (off when absent). */
      http: listenSchema.optional(),
      round: z
        .strictObject({
          minMs: intIn(50, 60_000).default(200),
          maxMs: intIn(50, 60_000).default(500),
          /**
           * While target shares move, the next round comes in [fastMs, 2·fastMs] (daemon.ts);
           * a value above minMs counts as minMs.
           */
          fastMs: intIn(10, 60_000).default(50),
        })
        .default({ minMs: 200, maxMs: 500, fastMs: 50 })
        .refine((r) => r.maxMs >= r.minMs, { message: "expected maxMs ≥ minMs", path: ["maxMs"] }),
      /**
       * Move quota to where demand is (DESIGN §3). Off: every region keeps its
       * static base slice (the baseline benchmarks compare against).
       */
      reweighting: z.boolean().default(true),
      /** Upper bound on one frame, bytes. */
      frameBytesMax: intIn(1024, 64 * 1024 * 1024).default(1024 * 1024),
      /** Redial backoff of a link that went down: exponential with full jitter, base → cap. */
      reconnect: z
        .strictObject({ baseMs: intIn(1, 60_000).default(100), capMs: intIn(1, 600_000).default(5000) })
        .default({ baseMs: 100, capMs: 5000 })
        .refine((r) => r.capMs >= r.baseMs, { message: "expected capMs ≥ baseMs", path: ["capMs"] }),
      /** Ping period; a link silent for 3 periods is terminated. */
      heartbeatMs: intIn(10, 60_000).default(1000),
      /**
       * The daemon's own Redis URL when it must differ from the limiter's
       * (e.g. the limiter reaches Redis through a proxy); default redis.url.
       */
      redisUrl: z
        .string()
        .regex(/^rediss?:\/\/.+/, "expected redis:// or rediss:// URL")
        .optional(),
      /**
       * Mutual TLS between daemons (wss://): this daemon's certificate and key
       * (server and client certificate alike) and the CA that signed every
       * region's certificate. Paths resolve against the config file's directory.
       * Required unless `plaintext` is true.
       */
      tls: z
        .strictObject({
          cert: z.string().min(1, "expected a certificate file path"),
          key: z.string().min(1, "expected a private key file path"),
          ca: z.string().min(1, "expected a CA certificate file path"),
        })
        .optional(),
      /** Explicit opt-out of TLS (loopback development clusters): links are unencrypted. */
      plaintext: z.boolean().default(false),
      /**
       * The clock check (docs/design.md §1.2 "Checked"): each daemon estimates
       * every peer's Redis clock offset (± half the round trip) from the stamps
       * of each round. A peer whose |offset| + uncertainty exceeds
       * `safeFraction`·2ε gets no loans and its loans are returned; it is let
       * back in at `resumeFraction`·2ε or below. An estimate older than
       * `maxSampleAgeMs` counts as none (excluded). `check: false` turns it off.
       */
      clock: z
        .strictObject({
          check: z.boolean().default(true),
          safeFraction: z
            .number()
            .gt(0, "expected > 0")
            .max(1, "expected ≤ 1 (a fraction of 2ε)")
            .default(0.5),
          resumeFraction: z.number().min(0, "expected ≥ 0").max(1, "expected ≤ 1").default(0.25),
          maxSampleAgeMs: intIn(100, 600_000).default(5000),
        })
        .default({ check: true, safeFraction: 0.5, resumeFraction: 0.25, maxSampleAgeMs: 5000 })
        .refine((c) => c.resumeFraction <= c.safeFraction, {
          message: "expected resumeFraction ≤ safeFraction (hysteresis)",
          path: ["resumeFraction"],
        }),
    }),
    lease: z
      .strictObject({
        /** ε ≥ 1 ms: 0 would silently assume perfectly synchronized clocks (DESIGN §3's margin gone). */
        epsilonMs: intIn(1, 60_000).default(250),
        loanDurationMs: intIn(100, 3_600_000).default(3000),
      })
      .default({ epsilonMs: 250, loanDurationMs: 3000 }),
    /** Per-region floor, ppm of 1_000_000 (default 2%). */
    floorPpm: intIn(0, SHARE_UNITS).default(20_000),
    /**
     * Replicated policy versions (issue 15, docs/design.md §3.4). `limiterStaleMs`: a
     * limiter decides with a policy snapshot only this long after it sent the read; the
     * daemon acks a version this long after writing it. `replicated` (default: more than
     * one region): policies come from the daemon's snapshot in Redis, not from the file.
     */
    policy: z
      .strictObject({
        limiterStaleMs: intIn(100, 60_000).default(1000),
        replicated: z.boolean().optional(),
      })
      .default({ limiterStaleMs: 1000 }),
    sharedSecret: SecretRefSchema,
    /** Relative paths resolve against the config file's directory. */
    policiesFile: z.string().min(1).default("policies.json"),
    adminToken: SecretRefSchema,
    breaker: breakerSchema,
    failMode: z.enum(["closed", "open"]).default("closed"),
    /**
     * Status of a denied POST /v1/check: 429, or 200 for clients that read
     * `allowed` from the body and treat any non-2xx as a transport error.
     */
    deniedStatus: z.literal([429, 200], { error: "expected 429 or 200" }).default(429),
    /**
     * The `pk` parameter of the RateLimit headers: `hash` (an HMAC of the key,
     * default: end clients never see tenant ids), `raw` (the stored key), `omit`.
     */
    partitionKey: z.enum(["hash", "raw", "omit"]).default("hash"),
    keyHashSecret: SecretRefSchema.optional(),
    leased: leasedSchema,
    refund: refundSchema,
    /** Longest accepted tenant/resource before hashing (bytes). */
    keyMaxLength: intIn(1, 128).default(128),
    /** pino level of both processes; the LOG_LEVEL environment variable wins. */
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    /** Log every HTTP request/response of the limiter (two lines per check: off on the hot path). */
    logRequests: z.boolean().default(false),
    rls: rlsSchema.optional(),
  })
  .superRefine((c, ctx) => {
    const ids = c.regions.map((r) => r.id);
    ids.forEach((id, i) => {
      if (ids.indexOf(id) !== i)
        ctx.addIssue({ code: "custom", message: `duplicate region id ${id}`, path: ["regions", i, "id"] });
    });
    const eps = c.regions.map((r) => r.gossip);
    eps.forEach((e, i) => {
      // Port 0 is no address: "not known yet", handed to the daemon by the
      // local cluster's orchestrator once that peer has bound (gossip runGossip).
      if (e.endsWith(":0")) return;
      if (eps.indexOf(e) !== i)
        ctx.addIssue({
          code: "custom",
          message: `duplicate gossip endpoint ${e}`,
          path: ["regions", i, "gossip"],
        });
    });
    if (!ids.includes(c.region)) {
      ctx.addIssue({ code: "custom", message: `region ${c.region} is not in regions[]`, path: ["region"] });
    }
    if (c.floorPpm * c.regions.length > SHARE_UNITS) {
      ctx.addIssue({
        code: "custom",
        message: `floor × ${c.regions.length} regions exceeds 1000000`,
        path: ["floorPpm"],
      });
    }
    // DESIGN §3: D must cover several rounds plus 2ε or loans lapse between renewals.
    const needed = 2 * c.gossip.round.maxMs + 2 * c.lease.epsilonMs;
    if (c.lease.loanDurationMs < needed) {
      ctx.addIssue({
        code: "custom",
        message: `expected ≥ 2·gossip.round.maxMs + 2·epsilonMs = ${needed}`,
        path: ["lease", "loanDurationMs"],
      });
    }
    // A sample per round: an age limit under two rounds would exclude every peer between samples.
    if (c.gossip.clock.maxSampleAgeMs < 2 * c.gossip.round.maxMs) {
      ctx.addIssue({
        code: "custom",
        message: `expected ≥ 2·gossip.round.maxMs = ${2 * c.gossip.round.maxMs}`,
        path: ["gossip", "clock", "maxSampleAgeMs"],
      });
    }
    // The script caps an assignment at D: a longer TTL would be cut on every send.
    const rlqs = c.rls?.rlqs;
    if (rlqs !== undefined && rlqs.assignmentTtlMs + rlqs.deliveryMarginMs > c.lease.loanDurationMs) {
      ctx.addIssue({
        code: "custom",
        message: `expected assignmentTtlMs + deliveryMarginMs ≤ lease.loanDurationMs (D) = ${c.lease.loanDurationMs}: a reservation lasts at most D`,
        path: ["rls", "rlqs", "assignmentTtlMs"],
      });
    }
    // The store refuses leases longer than D (their expiry must be covered by P:b's TTL): a
    // longer durationMs would make every acquire fail and leased mode serve nothing.
    if (c.leased.enabled && c.leased.durationMs > c.lease.loanDurationMs) {
      ctx.addIssue({
        code: "custom",
        message: `expected ≤ lease.loanDurationMs (D) = ${c.lease.loanDurationMs}: the store refuses longer leases`,
        path: ["leased", "durationMs"],
      });
    }
    if (c.gossip.tls === undefined && !c.gossip.plaintext) {
      ctx.addIssue({
        code: "custom",
        message:
          "expected { cert, key, ca } (mutual TLS between regions), or gossip.plaintext: true to allow unencrypted gossip",
        path: ["gossip", "tls"],
      });
    }
    if (c.gossip.tls !== undefined && c.gossip.plaintext) {
      ctx.addIssue({
        code: "custom",
        message: "plaintext: true contradicts gossip.tls; remove one",
        path: ["gossip", "plaintext"],
      });
    }
    const rls = c.rls?.listen;
    if (rls !== undefined && rls.port !== 0) {
      for (const [what, l] of [
        ["the limiter's", c.listen],
        ["gossip's", c.gossip.listen],
      ] as const) {
        if (l.host === rls.host && l.port === rls.port) {
          ctx.addIssue({
            code: "custom",
            message: `rls listens on ${what} port`,
            path: ["rls", "listen", "port"],
          });
        }
      }
    }
    if (
      c.listen.port !== 0 &&
      c.listen.host === c.gossip.listen.host &&
      c.listen.port === c.gossip.listen.port
    ) {
      ctx.addIssue({
        code: "custom",
        message: "gossip listens on the limiter's port",
        path: ["gossip", "listen", "port"],
      });
    }
  });

export type RegionConfigInput = z.input<typeof RegionConfigSchema>;
type Parsed = z.output<typeof RegionConfigSchema>;

/** A validated region config with secrets resolved and paths absolute. */
export interface RegionConfig
  extends Omit<Parsed, "sharedSecret" | "adminToken" | "keyHashSecret" | "refund" | "policy" | "rls"> {
  /** The RLS listener (absent: off), `configs` resolved against the config file's directory. */
  readonly rls?: z.output<typeof rlsSchema>;
  /** Replicated policies: `replicated` resolved (default true when regions.length > 1). */
  readonly policy: { readonly limiterStaleMs: number; readonly replicated: boolean };
  readonly sharedSecret: string;
  readonly adminToken: string;
  readonly keyHashSecret?: string;
  /** Refund receipts: the resolved HMAC key and the refund window. */
  readonly refund: { readonly secret: string; readonly windowMs: number };
  /** `policiesFile` resolved against the config file's directory (so are `gossip.tls` paths). */
  readonly policiesPath: string;
  /** The file this came from (for error messages). */
  readonly file: string;
}

export interface ParseOptions {
  /** Label used in errors, usually the path as given. */
  file: string;
  /** Directory relative paths resolve against. */
  baseDir?: string;
  env?: Readonly<Record<string, string | undefined>>;
}

export function parseRegionConfig(raw: unknown, options: ParseOptions): RegionConfig {
  const parsed = RegionConfigSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(options.file, issuesOf(parsed.error));
  const c = parsed.data;
  const env = options.env ?? process.env;
  const problems: string[] = [];
  const secret = (field: string, ref: Parsed["sharedSecret"] | undefined): string | undefined => {
    if (ref === undefined) return undefined;
    const r = resolveSecret(ref, env);
    if (!r.ok) {
      problems.push(`${field}: ${r.message}`);
      return undefined;
    }
    return r.value;
  };
  const sharedSecret = secret("sharedSecret", c.sharedSecret);
  const adminToken = secret("adminToken", c.adminToken);
  const keyHashSecret = secret("keyHashSecret", c.keyHashSecret);
  const refundSecret = secret("refund.secret", c.refund.secret);
  if (problems.length > 0 || sharedSecret === undefined || adminToken === undefined) {
    throw new ConfigError(options.file, problems);
  }
  const { keyHashSecret: _k, refund, rls, ...rest } = c;
  const baseDir = options.baseDir ?? process.cwd();
  const tls = c.gossip.tls;
  return {
    ...rest,
    gossip: {
      ...c.gossip,
      ...(tls !== undefined
        ? {
            tls: {
              cert: resolve(baseDir, tls.cert),
              key: resolve(baseDir, tls.key),
              ca: resolve(baseDir, tls.ca),
            },
          }
        : {}),
    },
    sharedSecret,
    adminToken,
    refund: { secret: refundSecret ?? deriveRefundSecret(sharedSecret), windowMs: refund.windowMs },
    ...(keyHashSecret !== undefined ? { keyHashSecret } : {}),
    policy: {
      limiterStaleMs: c.policy.limiterStaleMs,
      replicated: c.policy.replicated ?? c.regions.length > 1,
    },
    policiesPath: resolve(baseDir, c.policiesFile),
    ...(rls !== undefined ? { rls: { ...rls, configs: rls.configs.map((f) => resolve(baseDir, f)) } } : {}),
    file: options.file,
  };
}

/** A key for refund receipts only (domain-separated from the gossip links' use of sharedSecret). */
export function deriveRefundSecret(sharedSecret: string): string {
  return createHmac("sha256", sharedSecret).update("geoquota refund receipts v1").digest("base64url");
}

/** Reads JSON, naming the file on a syntax error. */
export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(path, [`(file): cannot read: ${(err as Error).message}`]);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(path, [`(file): invalid JSON: ${(err as Error).message}`]);
  }
}

export function loadRegionConfig(
  path: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): RegionConfig {
  return parseRegionConfig(readJsonFile(path), { file: path, baseDir: dirname(resolve(path)), env });
}

export { ID_MESSAGE };
