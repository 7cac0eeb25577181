// The tests' way to the HTTP service: build the Limiter, then the app over it
// (buildApp takes a built Limiter). Each app gets a fresh metrics registry:
// tests build many apps in one process.
import type { FastifyInstance } from "fastify";
import { type AppConfig, type AppOptions, buildApp } from "../../src/app.js";
import { Limiter, type LimiterConfig, type LimiterDeps } from "../../src/limiter.js";

export type TestAppDeps = Omit<LimiterDeps, "config"> &
  Omit<AppOptions, "config"> & { readonly config: LimiterConfig & AppConfig };

export async function limiterApp(deps: TestAppDeps): Promise<FastifyInstance> {
  const { store, config, policies, clock, ping, metrics, ...app } = deps;
  const limiter = new Limiter({
    store,
    config,
    policies,
    metrics: metrics ?? true,
    ...(clock !== undefined ? { clock } : {}),
    ...(ping !== undefined ? { ping } : {}),
  });
  return await buildApp(limiter, { config, ...app });
}
