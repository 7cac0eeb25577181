// The seed's protected route, `POST /v1/payments/checkout`, as an example of
// the Fastify plugin on a user's own app. It used to ship inside the region
// service; the service now keeps only the product's routes. Here it runs in
// front of a region's `Limiter` (in-process: one Redis round-trip per
// request, no hop to the region's HTTP service).
import { geoquotaRateLimit, type Limiter } from "@geoquota/limiter";
import Fastify, { type FastifyInstance } from "fastify";

export const CHECKOUT_RESOURCE = "payments_checkout";
export const CHECKOUT_PATH = "/v1/payments/checkout";

/** A user's app with one rate-limited route: tenant from `X-Tenant-ID`, else `anonymous`. */
export async function buildCheckoutApp(limiter: Limiter): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  await app.register(geoquotaRateLimit, { limiter }); // before the routes it guards
  app.post(
    CHECKOUT_PATH,
    {
      config: {
        geoquota: { resource: CHECKOUT_RESOURCE, key: { header: "x-tenant-id", fallback: "anonymous" } },
      },
    },
    async (req) => {
      const tenant = req.headers["x-tenant-id"] ?? "anonymous";
      return { status: "accepted", tenant, region: limiter.region };
    },
  );
  return app;
}
