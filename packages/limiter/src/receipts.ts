// Refund receipts (DESIGN §7): an allowed check returns a receipt naming what
// was admitted (region, key, cost, the Redis TIME of the admission, its
// refund deadline, a unique id), signed with HMAC-SHA256. A refund must bring
// one back; refund.lua then gives back at most its cost, at most once, before
// its deadline and only in the incarnation that admitted it. So a region's
// refunds of a key never exceed what it admitted for the key within the window.
//
// Format: `gq1.<base64url payload>.<base64url mac>`, payload
// `region|tenant|resource|cost|admittedUs|expiresUs|id` (names never contain
// `|`), mac = HMAC-SHA256(secret, "gq1." + payload) truncated to 128 bits.
import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from "node:crypto";
import { NAME_PATTERN } from "@geoquota/core";

export interface ReceiptClaims {
  readonly region: string;
  /** The tenant and resource as the check named them (before key hashing). */
  readonly tenant: string;
  readonly resource: string;
  readonly cost: number;
  /** Redis TIME of the admission, µs. */
  readonly admittedUs: number;
  /** Refundable while Redis TIME < this (admission + the refund window when issued), µs. */
  readonly expiresUs: number;
  readonly id: string;
}

const VERSION = "gq1";
const MAC_BYTES = 16;
/** Longer strings are refused before any work (a receipt is ~150 characters). */
export const RECEIPT_CHARS_MAX = 1024;
export const RECEIPT_ID = /^[0-9a-f]{16,32}$/;

export class ReceiptSigner {
  /** Random per process; with the counter below, ids never repeat across processes in practice. */
  private readonly idPrefix = randomBytes(8).toString("hex");
  private seq = 0;
  private readonly key: KeyObject;

  constructor(
    secret: string,
    /** Refund window fixed into each receipt when issued, µs. */
    private readonly windowUs: number,
  ) {
    this.key = createSecretKey(Buffer.from(secret, "utf8"));
  }

  private mac(payload: string): Buffer {
    return createHmac("sha256", this.key).update(`${VERSION}.${payload}`).digest().subarray(0, MAC_BYTES);
  }

  /** A receipt for an admission the store made at Redis TIME `admittedUs`. */
  issue(region: string, tenant: string, resource: string, cost: number, admittedUs: number): string {
    this.seq += 1;
    const id = `${this.idPrefix}${this.seq.toString(16)}`;
    const payload = `${region}|${tenant}|${resource}|${cost}|${admittedUs}|${admittedUs + this.windowUs}|${id}`;
    return `${VERSION}.${Buffer.from(payload).toString("base64url")}.${this.mac(payload).toString("base64url")}`;
  }

  /** The claims of a receipt this secret signed, else undefined (forged, altered, malformed). */
  verify(receipt: string): ReceiptClaims | undefined {
    if (receipt.length > RECEIPT_CHARS_MAX) return undefined;
    const parts = receipt.split(".");
    if (parts.length !== 3 || parts[0] !== VERSION) return undefined;
    const payload = Buffer.from(parts[1]!, "base64url").toString("utf8");
    const given = Buffer.from(parts[2]!, "base64url");
    if (given.length !== MAC_BYTES || !timingSafeEqual(given, this.mac(payload))) return undefined;
    const f = payload.split("|");
    if (f.length !== 7) return undefined;
    const [region, tenant, resource, cost, admitted, expires, id] = f as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const claims: ReceiptClaims = {
      region,
      tenant,
      resource,
      cost: Number(cost),
      admittedUs: Number(admitted),
      expiresUs: Number(expires),
      id,
    };
    // Signed by us, so well-formed unless the secret is shared with something else: check anyway.
    const ok =
      NAME_PATTERN.test(region) &&
      NAME_PATTERN.test(tenant) &&
      NAME_PATTERN.test(resource) &&
      Number.isFinite(claims.cost) &&
      claims.cost > 0 &&
      Number.isSafeInteger(claims.admittedUs) &&
      Number.isSafeInteger(claims.expiresUs) &&
      claims.expiresUs > claims.admittedUs &&
      RECEIPT_ID.test(id);
    return ok ? claims : undefined;
  }
}
