// Test helpers: a recorder of admissions (per frame, for the exact oracle)
// and policies built in the test, so every figure a test asserts is visible
// next to it.
import { type PolicySet, parsePolicies } from "@geoquota/config";
import type { Admission } from "@geoquota/testkit";
import type { RawData } from "ws";
import { type FrameInfo, frameSeq } from "../src/index.js";

export interface StreamLimits {
  readonly bytes: { capacity: number; refillPerSecond: number };
  readonly frames: { capacity: number; refillPerSecond: number };
}

/** Policies where every tenant gets `limits` on stream_bytes / stream_frames. */
export function streamPolicies(
  limits: StreamLimits,
  extra: readonly Record<string, unknown>[] = [],
): PolicySet {
  return parsePolicies(streamPoliciesJson(limits, extra), "test-policies.json");
}

export function streamPoliciesJson(limits: StreamLimits, extra: readonly Record<string, unknown>[] = []) {
  return {
    default: { capacity: 5, refillPerSecond: 1 },
    policies: [
      { tenant: "*", resource: "stream_bytes", ...limits.bytes },
      { tenant: "*", resource: "stream_frames", ...limits.frames },
      ...extra,
    ],
  };
}

export interface Delivered {
  readonly tenant: string;
  readonly seq: number;
  readonly info: FrameInfo;
}

/** Collects delivered frames; `admissions` maps them for checkGlobalBound. */
export class Recorder {
  readonly delivered: Delivered[] = [];

  onFrame = (tenant: string, data: RawData, info: FrameInfo): void => {
    const buf = Buffer.isBuffer(data)
      ? data
      : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]);
    this.delivered.push({ tenant, seq: frameSeq(buf), info });
  };

  /** One admission per frame: decided after it was read and before it was delivered. */
  admissions(cost: "bytes" | "frames", filter?: (d: Delivered) => boolean): Admission[] {
    return this.delivered
      .filter((d) => filter?.(d) ?? true)
      .map((d) => ({
        sentMs: d.info.readAtMs,
        answeredMs: d.info.admittedAtMs,
        cost: cost === "bytes" ? d.info.bytes : 1,
      }));
  }

  /** Sequence numbers of one connection are 0, 1, 2, … with no gap. */
  seqsOf(filter: (d: Delivered) => boolean): number[] {
    return this.delivered.filter(filter).map((d) => d.seq);
  }
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * Admitted rate after the burst: from the admission that brought the total to
 * `capacity` to the last admission, in units per second.
 */
export function rateAfterBurst(
  admissions: readonly { answeredMs: number; cost: number }[],
  capacity: number,
) {
  const sorted = [...admissions].sort((a, b) => a.answeredMs - b.answeredMs);
  let sum = 0;
  let i = 0;
  for (; i < sorted.length && sum < capacity; i++) sum += sorted[i]!.cost;
  const start = sorted[i - 1]?.answeredMs ?? 0;
  const end = sorted[sorted.length - 1]?.answeredMs ?? 0;
  let after = 0;
  for (let j = i; j < sorted.length; j++) after += sorted[j]!.cost;
  return { perSecond: end > start ? (after * 1000) / (end - start) : 0, seconds: (end - start) / 1000 };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
