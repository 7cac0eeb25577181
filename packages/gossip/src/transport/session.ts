// Runs the handshake of handshake.ts on one socket, either role. Until it
// reports success no message is treated as data: every message before that
// must be the next handshake step or the socket is closed.
import type { RawData, WebSocket } from "ws";
import { type PeerDownReason, type TransportErrorCode, localReason } from "./errors.js";
import {
  computeMac,
  encodeAuth,
  encodeChallenge,
  encodeHello,
  encodeOk,
  newNonce,
  parseAuth,
  parseChallenge,
  parseHello,
  parseOk,
  type TranscriptInput,
  verifyMac,
} from "./handshake.js";
import { CloseTracker, toBytes } from "./socket.js";

export interface SessionContext {
  self: string;
  secret: string;
  version: number;
  timeoutMs: number;
}

export type SessionResult =
  | { ok: true; peer: string; tracker: CloseTracker }
  | { ok: false; peer: string | null; reason: PeerDownReason };

type Step = (bytes: Uint8Array) => void;

/**
 * Wires listeners for one handshake. `done` is called exactly once: on
 * success with the socket's listeners removed (the caller attaches its own
 * in the same tick), on failure after the socket closed.
 */
function runSession(
  ws: WebSocket,
  ctx: SessionContext,
  start: (api: SessionApi) => Step,
  done: (r: SessionResult) => void,
  knownPeer: string | null,
): void {
  const tracker = new CloseTracker(ws);
  let finished = false;
  let peer = knownPeer;

  const detach = () => {
    clearTimeout(timer);
    ws.off("message", onMessage);
    ws.off("close", onClose);
    ws.off("error", onError);
    ws.off("open", onOpen);
  };
  const api: SessionApi = {
    send: (b) => {
      if (ws.readyState === ws.OPEN) ws.send(b, { binary: true });
    },
    fail: (code, detail) => tracker.close(localReason(code, detail)),
    setPeer: (p) => {
      peer = p;
    },
    succeed: (p) => {
      finished = true;
      detach();
      done({ ok: true, peer: p, tracker });
    },
  };
  let step: Step | null = null;
  const onOpen = () => {
    step = start(api);
  };
  const onMessage = (data: RawData, isBinary: boolean) => {
    if (finished || tracker.decided) return;
    if (!isBinary) return api.fail("GQ_ERR_PROTOCOL", "text frame during handshake");
    if (step === null) return api.fail("GQ_ERR_PROTOCOL", "message before handshake start");
    step(toBytes(data));
  };
  const onError = (err: Error) => tracker.onError(err);
  const onClose = (code: number, reason: Buffer) => {
    if (finished) return;
    finished = true;
    detach();
    done({ ok: false, peer, reason: tracker.result(code, reason) });
  };
  const timer = setTimeout(() => {
    if (!finished)
      tracker.close(localReason("GQ_ERR_HANDSHAKE_TIMEOUT", `no handshake within ${ctx.timeoutMs} ms`));
  }, ctx.timeoutMs);

  ws.on("message", onMessage);
  ws.on("close", onClose);
  ws.on("error", onError);
  if (ws.readyState === ws.OPEN) onOpen();
  else ws.once("open", onOpen);
}

interface SessionApi {
  send(bytes: Uint8Array): void;
  fail(code: TransportErrorCode, detail: string): void;
  setPeer(peer: string): void;
  succeed(peer: string): void;
}

export interface AcceptContext extends SessionContext {
  /** Whether `id` is a configured peer. */
  isPeer(id: string): boolean;
  /** Whether `id` is the side that dials us (its id is smaller). */
  dialsUs(id: string): boolean;
}

/** Acceptor side: wait for hello, answer with challenge, verify auth, send ok. */
export function acceptSession(ws: WebSocket, ctx: AcceptContext, done: (r: SessionResult) => void): void {
  runSession(
    ws,
    ctx,
    (api) => {
      let transcript: Omit<TranscriptInput, "direction"> | null = null;
      return (bytes) => {
        if (transcript === null) {
          const hello = parseHello(bytes, ctx.version);
          if (!hello.ok) return api.fail(hello.code, hello.detail);
          const { from, to, n } = hello.value;
          if (!ctx.isPeer(from)) return api.fail("GQ_ERR_UNKNOWN_PEER", `peer ${from} is not configured`);
          api.setPeer(from);
          if (to !== ctx.self) return api.fail("GQ_ERR_UNKNOWN_PEER", `this is ${ctx.self}, not ${to}`);
          if (!ctx.dialsUs(from))
            return api.fail("GQ_ERR_ROLE", `${ctx.self} dials ${from}, not the reverse`);
          const acceptorNonce = newNonce();
          transcript = {
            version: ctx.version,
            dialer: from,
            acceptor: ctx.self,
            dialerNonce: n,
            acceptorNonce,
          };
          const mac = computeMac(ctx.secret, { ...transcript, direction: "acceptor->dialer" });
          api.send(encodeChallenge({ v: ctx.version, from: ctx.self, to: from, n: acceptorNonce, mac }));
          return;
        }
        const auth = parseAuth(bytes);
        if (!auth.ok) return api.fail(auth.code, auth.detail);
        if (!verifyMac(ctx.secret, { ...transcript, direction: "dialer->acceptor" }, auth.value.mac)) {
          return api.fail("GQ_ERR_AUTH", "bad MAC from dialer");
        }
        api.send(encodeOk());
        api.succeed(transcript.dialer);
      };
    },
    done,
    null,
  );
}

export interface DialContext extends SessionContext {
  peer: string;
}

/** Dialer side: send hello, verify the acceptor's MAC, answer with ours, wait for ok. */
export function dialSession(ws: WebSocket, ctx: DialContext, done: (r: SessionResult) => void): void {
  runSession(
    ws,
    ctx,
    (api) => {
      const dialerNonce = newNonce();
      api.send(encodeHello({ v: ctx.version, from: ctx.self, to: ctx.peer, n: dialerNonce }));
      let authenticated = false;
      return (bytes) => {
        if (!authenticated) {
          const ch = parseChallenge(bytes, ctx.version);
          if (!ch.ok) return api.fail(ch.code, ch.detail);
          const { from, to, n, mac } = ch.value;
          if (from !== ctx.peer || to !== ctx.self) {
            return api.fail("GQ_ERR_UNKNOWN_PEER", `expected ${ctx.peer}, reached ${from}`);
          }
          const t = {
            version: ctx.version,
            dialer: ctx.self,
            acceptor: ctx.peer,
            dialerNonce,
            acceptorNonce: n,
          };
          if (!verifyMac(ctx.secret, { ...t, direction: "acceptor->dialer" }, mac)) {
            return api.fail("GQ_ERR_AUTH", "bad MAC from acceptor");
          }
          api.send(encodeAuth({ mac: computeMac(ctx.secret, { ...t, direction: "dialer->acceptor" }) }));
          authenticated = true;
          return;
        }
        const ok = parseOk(bytes);
        if (!ok.ok) return api.fail(ok.code, ok.detail);
        api.succeed(ctx.peer);
      };
    },
    done,
    ctx.peer,
  );
}
