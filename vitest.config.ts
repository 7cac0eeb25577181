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

// Workspace packages resolve to their TypeScript sources (the "@geoquota/source"
// export condition), so tests never need a build; spawned processes run dist/.
const conditions = ["@geoquota/source", "import", "node", "default"];

const resolve = { conditions };
const ssr = { resolve: { conditions, externalConditions: conditions } };

export default defineConfig({
  test: {
    projects: [
      ...packages.map((name) => ({
        resolve,
        ssr,
        test: { ...shared, name, root: `packages/${name}`, include: ["test/**/*.test.ts"] },
      })),
      { resolve, ssr, test: { ...shared, name: "integration", root: "test", include: ["**/*.test.ts"] } },
    ],
  },
});
