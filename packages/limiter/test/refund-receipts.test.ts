// Refund receipts without Redis: the signature covers every field, and the
// paths that make no per-check Redis record (in-process leases) issue none.
import { describe, expect, it, vi } from "vitest";
import { Limiter } from "../src/limiter.js";
import { ReceiptSigner } from "../src/receipts.js";
import { testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { leasedApp } from "./helpers/leased-mode.js";

const SECRET = "receipt-test-secret-0123456789";

function fields(receipt: string): string[] {
  return Buffer.from(receipt.split(".")[1]!, "base64url").toString("utf8").split("|");
}

function withFields(receipt: string, f: string[]): string {
  const [v, , mac] = receipt.split(".");
  return `${v}.${Buffer.from(f.join("|")).toString("base64url")}.${mac}`;
}

describe("ReceiptSigner", () => {
  const s = new ReceiptSigner(SECRET, 60_000_000);

  it("round-trips the claims; ids are unique", () => {
    const a = s.issue("us-east", "t", "r", 0.25, 1_700_000_000_000_000);
    const b = s.issue("us-east", "t", "r", 0.25, 1_700_000_000_000_000);
    expect(s.verify(a)).toMatchObject({
      region: "us-east",
      tenant: "t",
      resource: "r",
      cost: 0.25,
      admittedUs: 1_700_000_000_000_000,
      expiresUs: 1_700_000_060_000_000,
    });
    expect(s.verify(a)?.id).not.toBe(s.verify(b)?.id);
    expect(new ReceiptSigner(SECRET, 1).verify(a)?.id).toBe(s.verify(a)?.id);
  });

  it("refuses a change to any field, another secret, another version, and junk", () => {
    const r = s.issue("us-east", "t", "r", 1, 1_700_000_000_000_000);
    const f = fields(r);
    expect(f).toHaveLength(7);
    const replacements = [
      "eu-west",
      "t2",
      "r2",
      "2",
      "1700000000000001",
      "1800000000000000",
      "0123456789abcdef0",
    ];
    for (let i = 0; i < f.length; i++) {
      const g = [...f];
      g[i] = replacements[i]!;
      expect({ field: i, claims: s.verify(withFields(r, g)) }).toEqual({ field: i, claims: undefined });
    }
    expect(new ReceiptSigner(`${SECRET}x`, 60_000_000).verify(r)).toBeUndefined();
    expect(s.verify(r.replace(/^gq1\./, "gq2."))).toBeUndefined();
    for (const junk of ["", "gq1", "gq1..", "gq1.a.b.c", `${r}x`, `${r}.`, "x".repeat(2000)]) {
      expect(s.verify(junk)).toBeUndefined();
    }
  });
});

describe("a decision's receipt is signed when first read", () => {
  // Signing (HMAC-SHA256 and its encoding) was about a quarter of Limiter.check's Node CPU: a
  // caller that never reads the receipt (RLS, a library caller that never refunds) must not
  // pay for it, and one that does gets the same receipt on every read.
  it("no signature until read; one signature for any number of reads, copies and JSON", async () => {
    const issue = vi.spyOn(ReceiptSigner.prototype, "issue");
    try {
      const limiter = new Limiter({ store: new FakeStore(), config: testConfig(), policies: testPolicies() });
      const r = await limiter.check("cust_ent_9942", "payments_checkout", 1);
      expect(r).toMatchObject({ allowed: true, source: "store" });
      expect(issue).not.toHaveBeenCalled();
      const receipt = r.refundReceipt;
      expect(receipt).toMatch(/^gq1\./);
      expect(r.refundReceipt).toBe(receipt);
      expect({ ...r }.refundReceipt).toBe(receipt);
      expect(JSON.parse(JSON.stringify(r)).refundReceipt).toBe(receipt);
      expect(issue).toHaveBeenCalledTimes(1);
    } finally {
      issue.mockRestore();
    }
  });
});

describe("refunds and the leased path", () => {
  it("a check served from an in-process lease has no receipt; one served by the store has", async () => {
    const { app } = await leasedApp();
    const key = { tenant: "cust_ent_9942", resource: "payments_checkout" };
    const first = await app.inject({ method: "POST", url: "/v1/check", payload: key });
    // No lease held yet: the store decided (and the client started leasing in the background).
    expect(first.json().refundReceipt).toEqual(expect.any(String));
    await app.limiter.leases.get(app.limiter.resolve(key.tenant, key.resource)).settled();
    const leased = await app.inject({ method: "POST", url: "/v1/check", payload: key });
    expect(leased.statusCode).toBe(200);
    expect(leased.json().refundReceipt).toBeUndefined();
    const back = await app.inject({
      method: "POST",
      url: "/v1/refund",
      payload: { ...key, receipt: first.json().refundReceipt },
    });
    expect(back.json()).toMatchObject({ refunded: 1 });
    await app.close();
  });

  it("the window is the receipt's: past it, 410 even on a store that never lost state", async () => {
    const { app, store } = await leasedApp();
    const key = { tenant: "cust_ent_9942", resource: "payments_checkout" };
    const receipt = (await app.inject({ method: "POST", url: "/v1/check", payload: key })).json()
      .refundReceipt;
    store.advanceMs(60_000);
    const r = await app.inject({ method: "POST", url: "/v1/refund", payload: { ...key, receipt } });
    expect(r.statusCode).toBe(410);
    expect(r.json()).toMatchObject({ code: "GQ_ERR_RECEIPT_EXPIRED", field: "receipt" });
    expect(r.json().message).toMatch(/^receipt: its refund window ended 0\.000 s ago$/);
    await app.close();
  });
});
