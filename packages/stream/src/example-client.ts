// Example client: streams binary frames at a target byte rate (e.g. 4× the
// tenant's byte rate, or as fast as possible) to the example server. Each
// payload starts with its sequence number (uint32 BE), so the receiver can
// check order and loss. The client never buffers more than
// `bufferedBytesMax` in ws: when the server stops reading, its writes stall
// and `bufferedAmount` shows the backpressure.
import { performance } from "node:perf_hooks";
import { WebSocket } from "ws";

export interface FloodClientOptions {
  /** `ws://127.0.0.1:port/stream` */
  readonly url: string;
  readonly tenant: string;
  /** Payload size per frame (≥ 4: the sequence number). */
  readonly frameBytes: number;
  /** Target send rate; Infinity = as fast as the socket takes it. */
  readonly bytesPerSecond: number;
  readonly durationMs: number;
  /** Stop queueing in ws beyond this (default 64 MiB). */
  readonly bufferedBytesMax?: number;
  /** Send at most this many frames (then only wait). */
  readonly stopAfterFrames?: number;
  /** Checked every tick: close early once true (e.g. everything arrived). */
  readonly doneWhen?: () => boolean;
  /** Each admission report of the server, as it arrives. */
  readonly onReport?: (r: { admittedFrames: number; admittedBytes: number; paused: boolean }) => void;
  /** Sampled every tick (tests watch backpressure). */
  readonly onTick?: (s: { elapsedMs: number; sentBytes: number; bufferedAmount: number }) => void;
}

export interface FloodResult {
  readonly sentFrames: number;
  readonly sentBytes: number;
  /** The last admission report of the server, if any. */
  readonly lastReport: { admittedFrames: number; admittedBytes: number; paused: boolean } | undefined;
  readonly maxBufferedAmount: number;
}

const TICK_MS = 5;

/** Sequence-numbered payload of `bytes` bytes. */
export function framePayload(seq: number, bytes: number): Buffer {
  const b = Buffer.alloc(Math.max(4, bytes), seq & 0xff);
  b.writeUInt32BE(seq >>> 0, 0);
  return b;
}

export function frameSeq(data: Buffer): number {
  return data.readUInt32BE(0);
}

export async function runFloodClient(o: FloodClientOptions): Promise<FloodResult> {
  if (!(o.frameBytes >= 4 && o.frameBytes <= 64 * 1024 * 1024))
    throw new RangeError("frameBytes in [4, 64 MiB]");
  const bufferedMax = o.bufferedBytesMax ?? 64 * 1024 * 1024;
  const ws = new WebSocket(o.url, { headers: { "x-tenant-id": o.tenant } });
  let lastReport: FloodResult["lastReport"];
  ws.on("message", (data, isBinary) => {
    if (isBinary) return;
    try {
      const rep = JSON.parse(String(data)) as NonNullable<FloodResult["lastReport"]>;
      lastReport = rep;
      o.onReport?.(rep);
    } catch {
      // not a report: ignore
    }
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.on("error", () => {});
  const start = performance.now();
  let seq = 0;
  let sentBytes = 0;
  let maxBuffered = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const elapsedMs = performance.now() - start;
      if (elapsedMs >= o.durationMs || ws.readyState !== ws.OPEN || o.doneWhen?.() === true) {
        resolve();
        return;
      }
      const due =
        o.bytesPerSecond === Number.POSITIVE_INFINITY
          ? Number.POSITIVE_INFINITY
          : (o.bytesPerSecond * elapsedMs) / 1000;
      // Bounded per tick so one tick cannot queue unboundedly.
      const maxFrames = o.stopAfterFrames ?? Number.POSITIVE_INFINITY;
      for (
        let i = 0;
        i < 10_000 && seq < maxFrames && sentBytes < due && ws.bufferedAmount < bufferedMax;
        i++
      ) {
        ws.send(framePayload(seq++, o.frameBytes), { binary: true });
        sentBytes += o.frameBytes;
      }
      maxBuffered = Math.max(maxBuffered, ws.bufferedAmount);
      o.onTick?.({ elapsedMs, sentBytes, bufferedAmount: ws.bufferedAmount });
      setTimeout(tick, TICK_MS);
    };
    tick();
  });
  ws.terminate();
  return { sentFrames: seq, sentBytes, lastReport, maxBufferedAmount: maxBuffered };
}
