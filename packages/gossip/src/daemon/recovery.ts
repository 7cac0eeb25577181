// Watches whether this region is in recovery (DESIGN §4): some shard's
// incarnation marker `<id>:<bornUs>` is younger than D + 2ε by the region's
// Redis clock. Drives the `geoquota_region_recovering` gauge and the
// recovery_started / recovery_ended log events. Read-only: markers are made
// and rotated by the scripts and by checkPrimary.
import { type RedisClient, readShardMarkers } from "@geoquota/redis";

export interface RecoveryState {
  readonly recovering: boolean;
  /** Shards in recovery now. */
  readonly shards: number;
  /** Redis time (µs) when the last shard leaves recovery; 0 when not recovering. */
  readonly untilUs: number;
}

export function recoveryOf(
  markers: readonly (string | null)[],
  nowUs: number,
  timing: { loanDurationMs: number; epsilonMs: number },
): RecoveryState {
  const spanUs = (timing.loanDurationMs + 2 * timing.epsilonMs) * 1000;
  let shards = 0;
  let untilUs = 0;
  for (const m of markers) {
    if (m === null) continue; // not created yet: the first script to touch the shard makes it
    const born = Number(m.slice(m.indexOf(":") + 1));
    if (!Number.isFinite(born)) continue;
    const end = born + spanUs;
    if (nowUs < end) {
      shards++;
      untilUs = Math.max(untilUs, end);
    }
  }
  return { recovering: shards > 0, shards, untilUs };
}

/** Reads every shard's marker and the Redis time. */
export async function readRecovery(
  redis: RedisClient,
  timing: { loanDurationMs: number; epsilonMs: number },
): Promise<RecoveryState> {
  const { markers, nowUs } = await readShardMarkers(redis);
  return recoveryOf(markers, nowUs, timing);
}

export interface RecoveryWatch {
  /** One check now (also run every interval). */
  poll(): Promise<RecoveryState>;
  stop(): void;
}

/** Polls every `intervalMs`; calls `onChange` on each transition (and once for the first reading). */
export function watchRecovery(
  redis: RedisClient,
  timing: { loanDurationMs: number; epsilonMs: number },
  intervalMs: number,
  onChange: (now: RecoveryState, before: RecoveryState | undefined) => void,
  onError: (err: unknown) => void,
): RecoveryWatch {
  let last: RecoveryState | undefined;
  let inFlight: Promise<RecoveryState> | undefined;
  const poll = (): Promise<RecoveryState> => {
    inFlight ??= readRecovery(redis, timing)
      .then((s) => {
        if (last === undefined || last.recovering !== s.recovering) onChange(s, last);
        last = s;
        return s;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
  const timer = setInterval(() => {
    poll().catch(onError);
  }, intervalMs);
  timer.unref();
  return {
    poll,
    stop: () => clearInterval(timer),
  };
}
