import { readdirSync } from "node:fs";
import { defineConfig } from "vitest/config";

// One project per package plus the cross-package suite in test/, so
// `vitest run` executes every tier (*.test.ts, *.int.test.ts, *.chaos.test.ts)
// of every package in one command.
const packages = readdirSync(new URL("./packages", import.meta.url)).sort();
const setupFiles = [new URL("./test/setup/hygiene.ts", import.meta.url).pathname];

const shared = {
  setupFiles,
  testTimeout: 60_000,
  hookTimeout: 240_000,
  pool: "forks" as const,
};

export default defineConfig({
  test: {
    projects: [
      ...packages.map((name) => ({
        test: { ...shared, name, root: `packages/${name}`, include: ["test/**/*.test.ts"] },
      })),
      { test: { ...shared, name: "integration", root: "test", include: ["**/*.test.ts"] } },
    ],
  },
});
