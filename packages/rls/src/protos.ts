// Envoy's RLS v3 API as Envoy's own Go module compiles it
// (github.com/envoyproxy/go-control-plane/envoy, pinned in test/go-rls-client/go.mod):
// `proto/envoy-rls-v3.binpb` is the FileDescriptorSet of rls.proto and its imports,
// written by that module's registry (test/go-rls-client/cmd/rls-descriptor, run by
// scripts/gen-rls-descriptor.sh; a test checks the file against a fresh run). Nothing here
// is hand-written, so the wire format is the one Envoy's generated types speak — including
// the per-descriptor hits_addend that older published .proto copies lack.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

/** The service's full name (health checks and reflection use it). */
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";

/** Where the descriptor set is (in the package, beside src/ and dist/). */
export const RLS_DESCRIPTOR_PATH = new URL("../proto/envoy-rls-v3.binpb", import.meta.url);

/** Proto field names as written (snake_case), 64-bit numbers as JS numbers, enums by name. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

export interface RlsApi {
  readonly definition: protoLoader.PackageDefinition;
  readonly service: grpc.ServiceDefinition;
  /** A client constructor (tests and the bench). */
  readonly Client: grpc.ServiceClientConstructor;
}

let cached: RlsApi | undefined;

/** A service of a descriptor set (`servicePath`: its dotted full name), loaded as the RLS is. */
export function loadServiceApi(path: URL, servicePath: string): RlsApi {
  const definition = protoLoader.loadFileDescriptorSetFromBuffer(readFileSync(path), LOADER_OPTIONS);
  let at: unknown = grpc.loadPackageDefinition(definition);
  for (const part of servicePath.split(".")) at = (at as Record<string, unknown>)[part];
  const Client = at as grpc.ServiceClientConstructor;
  return { definition, service: Client.service, Client };
}

export function rlsApi(): RlsApi {
  cached ??= loadServiceApi(RLS_DESCRIPTOR_PATH, RLS_SERVICE);
  return cached;
}

/** The request as the loader decodes it. */
export interface RlsEntry {
  readonly key: string;
  readonly value: string;
}
export interface RlsDescriptor {
  readonly entries: readonly RlsEntry[];
  readonly limit: { readonly requests_per_unit: number; readonly unit: string } | null;
  readonly hits_addend: { readonly value: number } | null;
  /** Envoy ≥ 1.36: the hits are to be given back (refused: geoquota refunds need a receipt). */
  readonly is_negative_hits?: boolean;
}
export interface RlsRequest {
  readonly domain: string;
  readonly descriptors: readonly RlsDescriptor[];
  readonly hits_addend: number;
}

export type RlsCode = "OK" | "OVER_LIMIT";

export interface RlsRateLimit {
  readonly name: string;
  readonly requests_per_unit: number;
  readonly unit: string;
}

export interface RlsStatus {
  readonly code: RlsCode;
  readonly current_limit?: RlsRateLimit;
  readonly limit_remaining: number;
  readonly duration_until_reset?: { readonly seconds: number; readonly nanos: number };
}

export interface RlsResponse {
  readonly overall_code: RlsCode;
  readonly statuses: readonly RlsStatus[];
  readonly response_headers_to_add: readonly { readonly key: string; readonly value: string }[];
}
