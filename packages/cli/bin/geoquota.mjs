#!/usr/bin/env node
// Entry point of the `geoquota` CLI. It runs the built JavaScript, bundled by
// scripts/build.sh into one file per command (dist/bundle/: a local cluster
// starts six node processes at once, and loading hundreds of modules each was
// most of its start time). GQ_UNBUNDLED=1 runs tsc's dist/ module by module
// instead. A development checkout without a build runs the TypeScript sources
// through tsx (GQ_FROM_SOURCE=1 forces that), with the "@geoquota/source"
// export condition added by a resolve hook so that workspace packages resolve
// to their src/ too.
import { existsSync } from "node:fs";
import { register } from "node:module";

const bundled = new URL("../dist/bundle/main.js", import.meta.url);
const built = new URL("../dist/main.js", import.meta.url);
if (process.env.GQ_FROM_SOURCE || !existsSync(built)) {
  const hook = `export function resolve(s, c, next) {
    return next(s, { ...c, conditions: [...c.conditions, "@geoquota/source"] });
  }`;
  register(`data:text/javascript,${encodeURIComponent(hook)}`);
  const tsx = await import("tsx/esm/api");
  tsx.register();
  await import("../src/main.ts");
} else if (existsSync(bundled) && !process.env.GQ_UNBUNDLED) {
  await import(bundled.href);
} else {
  await import(built.href);
}
