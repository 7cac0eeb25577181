// The RLS front door on a real region (DESIGN §11): per-descriptor costs from hits_addend
// (0 = check only), a descriptor's limit override, the IETF RateLimit fields, errors as gRPC
// status errors (never overall_code UNKNOWN), the degraded modes, health and reflection.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { StoreMisuseError } from "@geoquota/core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RlsRig, rlsRequest, startRig } from "./harness.js";

const require = createRequire(import.meta.url);

/** The client constructor at a dotted path of a loaded package. */
function serviceAt(pkg: grpc.GrpcObject, path: string): grpc.ServiceClientConstructor {
  let at: unknown = pkg;
  for (const part of path.split(".")) at = (at as Record<string, unknown>)[part];
  return at as grpc.ServiceClientConstructor;
}
let n = 0;
const fresh = () => `v${process.pid}x${++n}`;

describe("ShouldRateLimit on one region", () => {
  let rig: RlsRig;
  beforeAll(async () => {
    rig = await startRig(["integration/another.yaml"]);
  });
  afterAll(async () => {
    await rig?.stop();
  });

  it("the request's hits_addend is every descriptor's cost; a descriptor's own wins, 0 counting nothing", async () => {
    const v = fresh();
    const r1 = await rig.call("another", [{ entries: [["key4", v]] }], 3);
    expect(r1.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 17 });
    // key4 asks 5 of its own; key3 (10/hour) takes the request's 2.
    const r2 = await rig.call(
      "another",
      [{ entries: [["key4", v]], hitsAddend: 5 }, { entries: [["key3", v]] }],
      2,
    );
    expect(r2.statuses.map((s) => s.limit_remaining)).toEqual([12, 8]);
    // hits_addend 0 on key4: a check that counts nothing, beside key3 charged 1 (request hits 0 → 1).
    const r3 = await rig.call("another", [
      { entries: [["key4", v]], hitsAddend: 0 },
      { entries: [["key3", v]] },
    ]);
    expect(r3.overall_code).toBe("OK");
    expect(r3.statuses.map((s) => s.limit_remaining)).toEqual([12, 7]);
    const r4 = await rig.call("another", [{ entries: [["key4", v]], hitsAddend: 0 }]);
    expect(r4.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 12 });
  });

  it("a check-only descriptor whose limit is spent denies the request, and the others are not charged", async () => {
    const v = fresh();
    expect(
      (await rig.call("another", [{ entries: [["key3", v]], hitsAddend: 10 }])).statuses[0]!.limit_remaining,
    ).toBe(0);
    const r = await rig.call("another", [
      { entries: [["key4", v]], hitsAddend: 4 },
      { entries: [["key3", v]], hitsAddend: 0 },
    ]);
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[1]).toMatchObject({ code: "OVER_LIMIT", limit_remaining: 0 });
    // key4 passed on its own but was not charged: it still holds all 20.
    expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 20 });
    const after = await rig.call("another", [{ entries: [["key4", v]], hitsAddend: 0 }]);
    expect(after.statuses[0]!.limit_remaining).toBe(20);
  });

  it("a descriptor's limit override is a limit of its own (3 per hour), current_limit says so", async () => {
    const v = fresh();
    const d = [
      { entries: [["tenant", v]] as [string, string][], limit: { requests_per_unit: 3, unit: "HOUR" } },
    ];
    const codes: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await rig.call("another", d, 1);
      codes.push(r.overall_code);
      expect(r.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 3, unit: "HOUR" });
      const s = Number(r.statuses[0]!.duration_until_reset!.seconds);
      expect(s).toBeGreaterThan(0);
      expect(s).toBeLessThanOrEqual(3600);
    }
    expect(codes).toEqual(["OK", "OK", "OK", "OVER_LIMIT"]);
    // Another override on the same descriptor is another key (its own counter).
    const other = await rig.call("another", [{ ...d[0]!, limit: { requests_per_unit: 5, unit: "HOUR" } }], 1);
    expect(other.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4 });
    // As envoyproxy/ratelimit: an unknown domain has no limits, overrides included.
    const unknown = await rig.call("nope", d, 1);
    expect(unknown.statuses[0]).toMatchObject({ code: "OK", current_limit: null });
  });

  it("response_headers_to_add carries the HTTP API's IETF fields; Retry-After when over", async () => {
    const v = fresh();
    const ok = await rig.call("another", [{ entries: [["key3", v]] }], 1);
    const h = Object.fromEntries(ok.response_headers_to_add.map((x) => [x.key, x.value]));
    expect(h["ratelimit-policy"]).toMatch(/q=10/);
    expect(h.ratelimit).toMatch(/r=9/);
    expect(h["retry-after"]).toBeUndefined();
    const over = await rig.call("another", [{ entries: [["key3", v]], hitsAddend: 10 }]);
    const ho = Object.fromEntries(over.response_headers_to_add.map((x) => [x.key, x.value]));
    expect(over.overall_code).toBe("OVER_LIMIT");
    expect(Number(ho["retry-after"])).toBeGreaterThanOrEqual(1);
    // No limit matched: no headers.
    expect((await rig.call("another", [{ entries: [["zzz", v]] }], 1)).response_headers_to_add).toEqual([]);
  });

  it("a bad request is a gRPC INVALID_ARGUMENT error, never a response (so never overall_code UNKNOWN)", async () => {
    const cases = [
      { domain: "", descriptors: [{ entries: [{ key: "a", value: "b" }] }] },
      { domain: "another", descriptors: [] },
      { domain: "another", descriptors: [{ entries: [] }] },
      rlsRequest("another", [{ entries: [["key3", fresh()]], hitsAddend: 2_000_000_000 }]),
      rlsRequest("geoquota", [
        {
          entries: [
            ["tenant", "x".repeat(200)],
            ["resource", "api"],
          ],
        },
      ]),
    ];
    for (const c of cases) {
      const { err, res } = await rig.raw(c);
      expect(res).toBeUndefined();
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    }
  });

  it("the native domain names keys of the policies file (tenant, resource)", async () => {
    const v = fresh();
    const d = [
      {
        entries: [
          ["tenant", v],
          ["resource", "api"],
        ] as [string, string][],
      },
    ];
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push((await rig.call("geoquota", d, 1)).overall_code);
    // The default policy: capacity 5.
    expect(codes).toEqual(["OK", "OK", "OK", "OK", "OK", "OVER_LIMIT"]);
  });

  it("health (grpc.health.v1) says SERVING for the RLS; reflection lists it", async () => {
    const hdef = protoLoader.loadSync(
      join(dirname(require.resolve("grpc-health-check/package.json")), "proto/health/v1/health.proto"),
      {
        enums: String,
      },
    );
    const H = serviceAt(grpc.loadPackageDefinition(hdef), "grpc.health.v1.Health");
    const hc = new H(rig.server.address, grpc.credentials.createInsecure());
    const status = await new Promise<string>((resolve, reject) =>
      (
        hc as unknown as { Check: (q: unknown, cb: (e: Error | null, r: { status: string }) => void) => void }
      ).Check(
        { service: "envoy.service.ratelimit.v3.RateLimitService" },
        (e: Error | null, r: { status: string }) => (e ? reject(e) : resolve(r.status)),
      ),
    );
    hc.close();
    expect(status).toBe("SERVING");
    const rdef = protoLoader.loadSync(
      join(
        dirname(require.resolve("@grpc/reflection/package.json")),
        "build/proto/grpc/reflection/v1/reflection.proto",
      ),
      { keepCase: true },
    );
    const R = serviceAt(grpc.loadPackageDefinition(rdef), "grpc.reflection.v1.ServerReflection");
    const rc = new R(rig.server.address, grpc.credentials.createInsecure());
    const names = await new Promise<string[]>((resolve, reject) => {
      const call = (
        rc as unknown as { ServerReflectionInfo: () => grpc.ClientDuplexStream<unknown, unknown> }
      ).ServerReflectionInfo();
      call.on("data", (m: unknown) => {
        const r = m as { list_services_response?: { service: { name: string }[] } };
        resolve((r.list_services_response?.service ?? []).map((s) => s.name));
        call.end();
      });
      call.on("error", reject);
      call.write({ list_services: "" });
    });
    rc.close();
    expect(names).toContain("envoy.service.ratelimit.v3.RateLimitService");
  });
});

describe("degraded modes apply unchanged", () => {
  const rigs: RlsRig[] = [];
  afterEach(async () => {
    await Promise.all(rigs.splice(0).map((r) => r.stop()));
  });

  it("fail-closed (default): Redis down → OVER_LIMIT, a decision and not an error", async () => {
    const rig = await startRig(["integration/another.yaml"]);
    rigs.push(rig);
    await rig.redis.kill();
    const r = await rig.call("another", [{ entries: [["key3", fresh()]] }], 1);
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 10, unit: "HOUR" });
  });

  it("fail-open (opt-in): Redis down → OK from the process's fail-open bucket (it starts empty, then refills)", async () => {
    const rig = await startRig(["integration/another.yaml"], {
      failMode: "open",
      // A slow refill (one token per 200 ms): on a loaded machine the first call may
      // come tens of ms after the fail-open bucket is made, and must still find it empty.
      policies: { default: { capacity: 100, refillPerSecond: 5 } },
    });
    rigs.push(rig);
    await rig.redis.kill();
    const d = [
      {
        entries: [
          ["tenant", fresh()],
          ["resource", "api"],
        ] as [string, string][],
      },
    ];
    const first = await rig.call("geoquota", d, 1);
    expect(first.overall_code).toBe("OVER_LIMIT");
    await new Promise((r) => setTimeout(r, 500));
    const r = await rig.call("geoquota", d, 1);
    expect(r.overall_code).toBe("OK");
  });

  it("a store that fails outright: the client gets a gRPC UNAVAILABLE status, never a response with UNKNOWN", async () => {
    const rig = await startRig(["integration/another.yaml"]);
    rigs.push(rig);
    // A misuse error is not an outage: the limiter rethrows it instead of deciding degraded.
    const store = (rig.region.limiter.store as unknown as { inner: Record<string, unknown> }).inner;
    for (const op of ["check", "checkCompound"]) {
      store[op] = async () => {
        throw new StoreMisuseError("GQ_ERR_BAD_ARGUMENT", "injected");
      };
    }
    for (const d of [
      [{ entries: [["key3", fresh()]] as [string, string][] }],
      [
        { entries: [["key3", fresh()]] as [string, string][] },
        { entries: [["key4", fresh()]] as [string, string][] },
      ],
    ]) {
      const { err, res } = await rig.raw(rlsRequest("another", d, 1));
      expect(res).toBeUndefined();
      expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    }
  });
});
