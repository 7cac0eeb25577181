// The gRPC listener of the RLS (DESIGN §11): RateLimitService/ShouldRateLimit,
// with `rlqs` also RateLimitQuotaService/StreamRateLimitQuotas, the standard
// health service (grpc.health.v1, per service name) and server reflection
// (grpcurl and friends list and call it without the protos).
import * as grpc from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import { RLS_SERVICE, type RlsRequest, type RlsResponse, rlsApi } from "./protos.js";
import { RLQS_SERVICE, type RlqsService, rlqsApi } from "./rlqs.js";
import { RlsError, type RlsService } from "./service.js";

export interface RlsServerOptions {
  readonly service: RlsService;
  /** Mounted beside the RLS when given (config `rls.rlqs`). */
  readonly rlqs?: RlqsService;
  readonly host: string;
  /** 0: any free port. */
  readonly port: number;
  /** Every request that ended in a gRPC error (for logging). */
  readonly onError?: (err: unknown) => void;
}

export interface RlsServer {
  /** `host:port` it listens on. */
  readonly address: string;
  readonly port: number;
  readonly health: HealthImplementation;
  close(): Promise<void>;
}

/** The gRPC status of an error: a request problem, else unavailable (Envoy's failure_mode_deny applies). */
export function grpcStatusOf(err: unknown): { code: grpc.status; details: string } {
  if (err instanceof RlsError) {
    return {
      code: err.code === "INVALID_ARGUMENT" ? grpc.status.INVALID_ARGUMENT : grpc.status.UNAVAILABLE,
      details: err.message,
    };
  }
  return {
    code: grpc.status.UNAVAILABLE,
    details: `the region could not decide: ${(err as Error)?.message ?? String(err)}`,
  };
}

export async function startRlsServer(o: RlsServerOptions): Promise<RlsServer> {
  const api = rlsApi();
  const server = new grpc.Server();
  server.addService(api.service, {
    shouldRateLimit(
      call: grpc.ServerUnaryCall<RlsRequest, RlsResponse>,
      callback: grpc.sendUnaryData<RlsResponse>,
    ) {
      o.service.shouldRateLimit(call.request).then(
        (res) => callback(null, res),
        (err: unknown) => {
          o.onError?.(err);
          const s = grpcStatusOf(err);
          callback({ code: s.code, details: s.details, name: "RlsError", message: s.details });
        },
      );
    },
  });
  const services = [RLS_SERVICE];
  let definition = api.definition;
  if (o.rlqs !== undefined) {
    const q = rlqsApi();
    server.addService(q.service, o.rlqs.handlers());
    services.push(RLQS_SERVICE);
    definition = { ...definition, ...q.definition };
  }
  const health = new HealthImplementation(Object.fromEntries(["", ...services].map((n) => [n, "SERVING"])));
  health.addToServer(server);
  new ReflectionService(definition).addToServer(server);
  const host = o.host.includes(":") && !o.host.startsWith("[") ? `[${o.host}]` : o.host;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${o.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    );
  });
  let closed: Promise<void> | undefined;
  return {
    address: `${host}:${port}`,
    port,
    health,
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const n of ["", ...services]) health.setStatus(n, "NOT_SERVING");
        // Streams last: each ends now with its buckets abandoned (TTL 0), not cancelled at the force.
        o.rlqs?.shutdown();
        // In-flight calls finish; past a second the rest are cancelled.
        const force = setTimeout(() => server.forceShutdown(), 1000);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closed;
    },
  };
}
