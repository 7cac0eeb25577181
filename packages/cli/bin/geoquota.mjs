#!/usr/bin/env node
// Entry point of the `geoquota` CLI. It runs the built JavaScript (dist/, made
// by `pnpm run build`, which the README's commands run first). A development
// checkout without a build runs the TypeScript sources through tsx instead
// (GQ_FROM_SOURCE=1 forces that), with the "@geoquota/source" export condition
// added by a resolve hook so that workspace packages resolve to their src/ too.
import { existsSync } from "node:fs";
import { register } from "node:module";

const built = new URL("../dist/main.js", import.meta.url);
if (existsSync(built) && !process.env.GQ_FROM_SOURCE) {
  await import(built.href);
} else {
  const hook = `export function resolve(s, c, next) {
    return next(s, { ...c, conditions: [...c.conditions, "@geoquota/source"] });
  }`;
  register(`data:text/javascript,${encodeURIComponent(hook)}`);
  const tsx = await import("tsx/esm/api");
  tsx.register();
  await import("../src/main.ts");
}
