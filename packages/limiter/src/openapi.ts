// Route schemas and the OpenAPI document. Request bodies are zod schemas in
// Fastify's `schema.body`, validated by `zodValidatorCompiler` (a 400 names
// the field); each route's summary and responses sit in `config.openapi`.
// GET /openapi.json is generated from the routes the app actually registered
// (an onRoute hook), so the document cannot list a route that does not exist
// or miss one that does.
import type { FastifyInstance, FastifySchemaCompiler, RouteOptions } from "fastify";
import { z } from "zod";
import { parseBody } from "./validation.js";

export interface ResponseDoc {
  readonly description: string;
  /** JSON body schema (zod); absent for bodies that are not JSON or not described. */
  readonly schema?: z.ZodType;
  /** Content type when not JSON (e.g. Prometheus text). */
  readonly contentType?: string;
  /** Response header names this response carries (documented as strings). */
  readonly headers?: readonly string[];
}

export interface ParameterDoc {
  readonly name: string;
  readonly in: "query" | "header";
  readonly description: string;
}

export interface RouteDoc {
  readonly summary: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  /** Needs `Authorization: Bearer <adminToken>`. */
  readonly admin?: boolean;
  /** Query and header parameters (path parameters come from the route's URL). */
  readonly parameters?: readonly ParameterDoc[];
  readonly responses: Readonly<Record<number, ResponseDoc>>;
}

declare module "fastify" {
  interface FastifyContextConfig {
    openapi?: RouteDoc;
  }
}

/** Bodies parsed by something other than `parseBody(schema, …)`; the schema only documents them. */
const customParsers = new WeakMap<z.ZodType, (data: unknown) => unknown>();

/** Registers how a documented schema is parsed (identity: the handler validates). */
export function withParser<T extends z.ZodType>(schema: T, parse: (data: unknown) => unknown): T {
  customParsers.set(schema, parse);
  return schema;
}

/** Fastify validator compiler for zod schemas; errors are LimiterErrors naming the field. */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema }) => {
  const parse = customParsers.get(schema) ?? ((data: unknown) => parseBody(schema, data));
  return (data: unknown) => {
    try {
      return { value: parse(data) };
    } catch (error) {
      return { error: error as Error };
    }
  };
};

export interface RegisteredRoute {
  readonly method: string;
  readonly url: string;
  readonly body?: z.ZodType;
  readonly doc?: RouteDoc;
}

/** Records every route registered after this call (HEAD routes are Fastify's automatic ones: skipped). */
export function collectRoutes(app: FastifyInstance): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  app.addHook("onRoute", (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const body = (route.schema as { body?: unknown } | undefined)?.body;
    for (const method of methods) {
      if (method === "HEAD") continue; // Fastify's automatic HEAD of a GET route
      routes.push({
        method,
        url: route.url,
        ...(body instanceof z.ZodType ? { body } : {}),
        ...(route.config?.openapi !== undefined ? { doc: route.config.openapi } : {}),
      });
    }
  });
  return routes;
}

/** `/v1/quotas/:tenant/:resource` → `/v1/quotas/{tenant}/{resource}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

type Json = Record<string, unknown>;

/** zod → JSON Schema 2020-12 (OpenAPI 3.1), named schemas moved to components. */
function jsonSchema(schema: z.ZodType, io: "input" | "output", components: Json): Json {
  const out = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as Json;
  const defs = (out.$defs ?? {}) as Json;
  delete out.$defs;
  delete out.$schema;
  const rewrite = (x: unknown): Json =>
    JSON.parse(JSON.stringify(x).replaceAll('"#/$defs/', '"#/components/schemas/'));
  // A named schema (top level too) comes back as a $ref into $defs.
  for (const [id, def] of Object.entries(defs)) components[id] = rewrite(def);
  return rewrite(out);
}

export interface OpenApiInfo {
  readonly title: string;
  readonly version: string;
  readonly description?: string;
}

/** The OpenAPI 3.1 document of the registered routes. */
export function openApiDocument(routes: readonly RegisteredRoute[], info: OpenApiInfo): Json {
  const components: Json = {};
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of routes) {
    const path = openApiPath(r.url);
    const params: Json[] = [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    for (const p of r.doc?.parameters ?? [])
      params.push({
        name: p.name,
        in: p.in,
        required: false,
        schema: { type: "string" },
        description: p.description,
      });
    const responses: Json = {};
    for (const [status, res] of Object.entries(r.doc?.responses ?? {})) {
      const entry: Json = { description: res.description };
      if (res.headers !== undefined && res.headers.length > 0) {
        entry.headers = Object.fromEntries(res.headers.map((h) => [h, { schema: { type: "string" } }]));
      }
      if (res.contentType !== undefined)
        entry.content = { [res.contentType]: { schema: { type: "string" } } };
      else if (res.schema !== undefined) {
        entry.content = { "application/json": { schema: jsonSchema(res.schema, "output", components) } };
      }
      responses[status] = entry;
    }
    if (Object.keys(responses).length === 0) responses.default = { description: "not described" };
    const op: Json = {
      operationId: `${r.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`,
      summary: r.doc?.summary ?? `${r.method} ${r.url}`,
      ...(r.doc?.description !== undefined ? { description: r.doc.description } : {}),
      ...(r.doc?.tags !== undefined ? { tags: [...r.doc.tags] } : {}),
      ...(r.doc?.admin === true ? { security: [{ bearer: [] }] } : {}),
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(r.body !== undefined
        ? {
            requestBody: {
              required: true,
              content: { "application/json": { schema: jsonSchema(r.body, "input", components) } },
            },
          }
        : {}),
      responses,
    };
    paths[path] ??= {};
    paths[path]![r.method.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: info.title,
      version: info.version,
      ...(info.description ? { description: info.description } : {}),
    },
    paths,
    components: {
      schemas: components,
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
  };
}
