// Envoy's RLS v3 API, loaded from the protos the gRPC team ships with
// @grpc/grpc-js-xds (deps/envoy-api and the imports beside it): nothing here is
// hand-written, so the wire format is Envoy's own.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const require = createRequire(import.meta.url);

/** The service's full name (health checks and reflection use it). */
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";

const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto";

/** Proto field names as written (snake_case), 64-bit numbers as JS numbers, enums by name. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

function includeDirs(): string[] {
  const root = join(dirname(require.resolve("@grpc/grpc-js-xds/package.json")), "deps");
  return ["envoy-api", "xds", "protoc-gen-validate", "googleapis"].map((d) => join(root, d));
}

export interface RlsApi {
  readonly definition: protoLoader.PackageDefinition;
  readonly service: grpc.ServiceDefinition;
  /** A client constructor (tests and the bench). */
  readonly Client: grpc.ServiceClientConstructor;
}

let cached: RlsApi | undefined;

export function rlsApi(): RlsApi {
  if (cached !== undefined) return cached;
  const definition = protoLoader.loadSync(RLS_PROTO, { ...LOADER_OPTIONS, includeDirs: includeDirs() });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  const Client = pkg.envoy.service.ratelimit.v3.RateLimitService;
  cached = { definition, service: Client.service, Client };
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
