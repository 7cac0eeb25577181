#!/usr/bin/env node
// Entry point of the `geoquota` CLI. The sources are TypeScript and are run
// through tsx's loader, so the CLI needs no build step.
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");
