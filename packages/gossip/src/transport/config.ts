import { z } from "zod";
import { NAME_MESSAGE, NAME_PATTERN } from "@geoquota/core";

/** The wire protocol version this build speaks. */
export const PROTOCOL_VERSION = 1;

/** A link is terminated after this many heartbeat periods without any inbound traffic. */
export const HEARTBEAT_MISSES_MAX = 3;

const MiB = 1024 * 1024;

// Same alphabet as every other region id in geoquota (@geoquota/core ids, docs/internals.md).
const regionId = z.string().regex(NAME_PATTERN, `region id: ${NAME_MESSAGE}`);

/** A peer's address: a ws:// or wss:// URL. */
export const peerUrlSchema = z
  .string()
  .max(2048)
  .refine((s) => {
    try {
      const u = new URL(s);
      return u.protocol === "ws:" || u.protocol === "wss:";
    } catch {
      return false;
    }
  }, "peer url must be a ws:// or wss:// URL");

export const MeshConfigSchema = z
  .object({
    self: regionId,
    listen: z.object({
      host: z.string().min(1).max(255),
      /** 0 picks a free port; Mesh.port() reports it after start(). */
      port: z.number().int().min(0).max(65535),
      /**
       * When `port` is taken (EADDRINUSE), listen on a port the kernel picks
       * instead of failing; for a process whose starter reads Mesh.port()
       * (the local cluster's orchestrator), never for a user's fixed port.
       */
      anyPortIfTaken: z.boolean().default(false),
    }),
    peers: z
      // `url` absent: the peer's address is not known yet (it is bound after
      // this process starts); it is not dialed until Mesh.setPeerUrl gives it.
      .array(z.object({ id: regionId, url: peerUrlSchema.optional() }))
      .max(64)
      .default([]),
    /** Shared by all regions; only used as an HMAC key, never sent. */
    secret: z.string().min(16).max(4096),
    protocolVersion: z.number().int().min(1).max(65535).default(PROTOCOL_VERSION),
    frameBytesMax: z
      .number()
      .int()
      .min(256)
      .max(64 * MiB)
      .default(MiB),
    /** send() refuses when the socket's buffered bytes would exceed this. */
    sendBufferedBytesMax: z
      .number()
      .int()
      .min(256)
      .max(256 * MiB)
      .default(4 * MiB),
    heartbeatMs: z.number().int().min(10).max(60_000).default(1000),
    inboundFramesPerSecondMax: z.number().positive().max(1_000_000).default(100),
    /** Bucket depth; defaults to one second's worth of inboundFramesPerSecondMax. */
    inboundFramesBurstMax: z.number().int().min(1).max(1_000_000).optional(),
    reconnect: z
      .object({
        baseMs: z.number().int().min(1).max(60_000).default(100),
        capMs: z.number().int().min(1).max(600_000).default(5000),
      })
      .default({ baseMs: 100, capMs: 5000 }),
    handshakeTimeoutMs: z.number().int().min(10).max(120_000).default(5000),
    /** How long a close handshake may take before the socket is destroyed. */
    closeGraceMs: z.number().int().min(10).max(30_000).default(1000),
    /** Unauthenticated inbound connections allowed at once. */
    pendingHandshakesMax: z.number().int().min(1).max(10_000).default(32),
    tls: z
      .object({
        keyPath: z.string().min(1),
        certPath: z.string().min(1),
        caPath: z.string().min(1),
      })
      .optional(),
  })
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    for (const [i, p] of c.peers.entries()) {
      if (p.id === c.self)
        ctx.addIssue({ code: "custom", path: ["peers", i, "id"], message: "peer id equals self" });
      if (seen.has(p.id))
        ctx.addIssue({ code: "custom", path: ["peers", i, "id"], message: "duplicate peer id" });
      seen.add(p.id);
      if (p.url === undefined) continue;
      const secure = p.url.startsWith("wss:");
      if (secure !== (c.tls !== undefined)) {
        ctx.addIssue({
          code: "custom",
          path: ["peers", i, "url"],
          message: c.tls ? "tls is configured: peer urls must be wss://" : "wss:// needs the tls config",
        });
      }
    }
    if (c.sendBufferedBytesMax < c.frameBytesMax) {
      ctx.addIssue({ code: "custom", path: ["sendBufferedBytesMax"], message: "must be >= frameBytesMax" });
    }
    if (c.reconnect.capMs < c.reconnect.baseMs) {
      ctx.addIssue({ code: "custom", path: ["reconnect", "capMs"], message: "must be >= baseMs" });
    }
  });

/** What callers write (defaults optional). */
export type MeshConfigInput = z.input<typeof MeshConfigSchema>;
/** After defaults. */
export type MeshConfig = z.output<typeof MeshConfigSchema>;

/** Throws a ZodError naming the bad field: a bad config is a startup bug, not a runtime outcome. */
export function parseMeshConfig(input: MeshConfigInput): MeshConfig {
  return MeshConfigSchema.parse(input);
}

/** The smaller id dials; the larger accepts (one link per pair, no dial races). */
export function dialsTo(self: string, peer: string): boolean {
  return self < peer;
}
