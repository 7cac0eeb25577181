// The rollout frame: this region's replicated policy state (or null while it
// does not know its policy), msgpack like the CRDT frames and told apart from
// them by its kind code (the CRDT codec knows kinds 1–3):
//
//   rollout [1, 16, from, state | null]     state = PeerStateWire (@geoquota/rollout)
//
// Decoding validates the whole state (zod) before anything is merged.
import { Decoder, Encoder } from "@msgpack/msgpack";
import { type PeerState, peerStateFromWire, peerStateToWire } from "@geoquota/rollout";

const PROTOCOL_VERSION = 1;
export const KIND_ROLLOUT = 16;

const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder({ maxBinLength: 0, maxExtLength: 0 });

export function encodeRolloutFrame(from: string, state: PeerState | null): Uint8Array {
  return encoder.encode([
    PROTOCOL_VERSION,
    KIND_ROLLOUT,
    from,
    state === null ? null : peerStateToWire(state),
  ]);
}

/** Cheap test on the first bytes (fixarray of 4, version 1, kind 16): a rollout frame, not a CRDT one. */
export function isRolloutFrame(bytes: Uint8Array): boolean {
  return (
    bytes.byteLength >= 3 && bytes[0] === 0x94 && bytes[1] === PROTOCOL_VERSION && bytes[2] === KIND_ROLLOUT
  );
}

export type RolloutFrame = { from: string; state: PeerState | null };

export function decodeRolloutFrame(
  bytes: Uint8Array,
): { ok: true; value: RolloutFrame } | { ok: false; error: string } {
  let raw: unknown;
  try {
    raw = decoder.decode(bytes);
  } catch (err) {
    return { ok: false, error: `rollout frame: msgpack: ${(err as Error).message}` };
  }
  if (!Array.isArray(raw) || raw.length !== 4 || raw[0] !== PROTOCOL_VERSION || raw[1] !== KIND_ROLLOUT)
    return { ok: false, error: "rollout frame: expected [1, 16, from, state]" };
  const from = raw[2];
  if (typeof from !== "string" || from.length === 0 || from.length > 64)
    return { ok: false, error: "rollout frame: from: expected a region id" };
  if (raw[3] === null) return { ok: true, value: { from, state: null } };
  const state = peerStateFromWire(raw[3]);
  if (!state.ok) return { ok: false, error: `rollout frame: ${state.error}` };
  return { ok: true, value: { from, state: state.value } };
}
