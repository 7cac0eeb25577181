// The RLS speaks Envoy's API as Envoy's Go module compiles it: the committed descriptor set
// is byte for byte what the pinned module's registry prints (scripts/gen-rls-descriptor.sh),
// and it has the fields the service reads (per-descriptor hits_addend, the limit override).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { repoRoot } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { RLS_DESCRIPTOR_PATH, rlsApi } from "../src/protos.js";
import { RLQS_DESCRIPTOR_PATH, rlqsApi } from "../src/rlqs.js";

describe("Envoy's RLS v3 descriptor set", () => {
  it("equals what go-control-plane/envoy's registry prints (.bin/rls-descriptor, built by the bootstrap)", () => {
    const fresh = execFileSync(`${repoRoot}/.bin/rls-descriptor`, { maxBuffer: 16 * 1024 * 1024 });
    expect(Buffer.compare(fresh, readFileSync(RLS_DESCRIPTOR_PATH))).toBe(0);
  });

  it("has ShouldRateLimit and the descriptor fields the service reads", () => {
    const api = rlsApi();
    expect(Object.keys(api.service)).toContain("ShouldRateLimit");
    const desc = api.definition["envoy.extensions.common.ratelimit.v3.RateLimitDescriptor"] as unknown as {
      type: { field: { name: string }[] };
    };
    expect(desc.type.field.map((f) => f.name)).toEqual(
      expect.arrayContaining(["entries", "limit", "hits_addend"]),
    );
  });
});

describe("Envoy's RLQS v3 descriptor set (issue 28)", () => {
  it("equals what go-control-plane/envoy's registry prints for rlqs.proto", () => {
    const fresh = execFileSync(
      `${repoRoot}/.bin/rls-descriptor`,
      ["envoy/service/rate_limit_quota/v3/rlqs.proto"],
      {
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    expect(Buffer.compare(fresh, readFileSync(RLQS_DESCRIPTOR_PATH))).toBe(0);
  });

  it("has StreamRateLimitQuotas and the token bucket fields the service sends", () => {
    expect(Object.keys(rlqsApi().service)).toEqual(["StreamRateLimitQuotas"]);
    const tb = rlqsApi().definition["envoy.type.v3.TokenBucket"] as unknown as {
      type: { field: { name: string }[] };
    };
    expect(tb.type.field.map((f) => f.name)).toEqual(["max_tokens", "tokens_per_fill", "fill_interval"]);
  });
});
