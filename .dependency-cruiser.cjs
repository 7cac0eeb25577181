// Import rules of docs/architecture.md ("The rule each package follows"),
// checked by test/dependency-rules.test.ts (project `integration`, so part of
// `npm test`) with dependency-cruiser. Run by hand:
//   pnpm exec depcruise --config .dependency-cruiser.cjs packages test
// Every rule holds today, with no exception. Should a known departure
// (docs/architecture.md) ever need one, add it as a commented, temporary
// `pathNot` on the rule it breaks and remove it when the departure is fixed.

/** Workspace packages that import no other workspace package (the ground floor). */
const LEAF_PACKAGES = ["sim", "core", "edge", "procs", "rollout"];

/** from/to of a rule "package `name` imports only the ground floor (@geoquota/core)". */
const onlyTheGroundFloor = (name) => ({
  from: { path: `^packages/${name}/src/` },
  to: { path: "^(packages/([^/]+)/|@geoquota/)", pathNot: [`^packages/(${name}|core)/`, "^@geoquota/core$"] },
});

const ourPackage = (names) => `^(packages/(${names.join("|")})/|@geoquota/(${names.join("|")})$)`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "No import cycles, inside a package or across packages.",
      from: {},
      to: { circular: true },
    },
    {
      name: "leaf-packages-import-nothing-of-ours",
      severity: "error",
      comment:
        "sim (PRNG, clock, network, the G1 oracle), core (the ground floor: shared vocabulary and the pure model), edge (the process edge: listening, process metrics), procs (process spawners) and rollout (replicated policy versions and their Redis keys) import no other workspace package.",
      from: { path: `^packages/(${LEAF_PACKAGES.join("|")})/src/` },
      to: { path: "^(packages/([^/]+)/|@geoquota/)", pathNot: ["^packages/$1/"] },
    },
    {
      name: "crdt-imports-only-the-ground-floor",
      severity: "error",
      comment:
        "crdt (pure data and functions) imports only the ground floor (@geoquota/core: the ids module's names, replica ids, quota key).",
      ...onlyTheGroundFloor("crdt"),
    },
    {
      name: "config-imports-only-the-ground-floor",
      severity: "error",
      comment:
        "config (schemas) imports only the ground floor (@geoquota/core: algorithms, policy shape, share units, quota key).",
      ...onlyTheGroundFloor("config"),
    },
    {
      name: "redis-imports-only-the-ground-floor",
      comment:
        "redis (the Lua loader, script bindings, connectRedis, the RegionStore and the daemon's Redis functions) imports only the ground floor (@geoquota/core: the vocabulary and the store interface).",
      severity: "error",
      ...onlyTheGroundFloor("redis"),
    },
    {
      name: "limiter-engine-knows-no-redis",
      severity: "error",
      comment:
        "The limiter's engine (limiter, guarded store, breaker, fail modes, lease pool, leased client) runs on the store interface of @geoquota/core: it never imports @geoquota/redis (nor its error type). main.ts, the index and the app wiring may.",
      from: {
        path: "^packages/limiter/src/(limiter|guarded-store|breaker|fail-open|lease-pool|leased-client|errors)\\.ts$",
      },
      to: { path: ourPackage(["redis"]) },
    },
    {
      name: "testkit-imports-only-spawners",
      severity: "error",
      comment:
        "The test kit imports no other workspace package except what it re-exports for tests: the process spawners (@geoquota/procs) and the simulation kit with the G1 oracle (@geoquota/sim).",
      from: { path: "^packages/testkit/src/" },
      to: {
        path: "^(packages/([^/]+)/|@geoquota/)",
        pathNot: ["^packages/(testkit|procs|sim)/", "^@geoquota/(procs|sim)$"],
      },
    },
    {
      name: "limiter-layer",
      severity: "error",
      comment:
        "The limiter imports config, core, crdt, edge, redis and rollout only: never the daemon, the stream, the CLI, the bench, the simulation, the test kit or the process spawners (@geoquota/procs: a library user installs no Toxiproxy client).",
      from: { path: "^packages/limiter/src/" },
      to: { path: ourPackage(["gossip", "stream", "cli", "bench", "sim", "simulator", "testkit", "procs"]) },
    },
    {
      name: "gossip-layer",
      severity: "error",
      comment:
        "The gossip daemon never imports the stream, the CLI, the bench, the process spawners (@geoquota/procs), nor the simulation kit or the simulation (@geoquota/sim, @geoquota/simulator: they drive the daemon, not the other way round).",
      from: { path: "^packages/gossip/src/" },
      to: { path: ourPackage(["stream", "cli", "bench", "procs", "sim", "simulator"]) },
    },
    {
      name: "gossip-never-imports-the-limiter",
      severity: "error",
      comment:
        "The gossip daemon sits beside the limiter, not above it: the vocabulary it shares with the limiter is @geoquota/core's, the process edge (listening, process metrics) @geoquota/edge's, log events @geoquota/config's.",
      from: { path: "^packages/gossip/src/" },
      to: { path: ourPackage(["limiter"]) },
    },
    {
      name: "stream-layer",
      severity: "error",
      comment:
        "The stream package imports config, core and limiter: never gossip, the CLI or the bench, nor Redis directly (its Redis is the limiter's store).",
      from: { path: "^packages/stream/src/" },
      to: { path: ourPackage(["gossip", "cli", "bench", "redis"]) },
    },
    {
      name: "rls-layer",
      severity: "error",
      comment:
        "The RLS front door imports config and limiter only: never gossip, stream, the CLI, the bench, nor Redis directly (its Redis is the limiter's store).",
      from: { path: "^packages/rls/src/" },
      to: { path: ourPackage(["gossip", "stream", "cli", "bench", "redis"]) },
    },
    {
      name: "bench-layer",
      severity: "error",
      comment: "The bench never imports the CLI (the CLI runs the bench), gossip or stream.",
      from: { path: "^packages/bench/src/" },
      to: { path: ourPackage(["cli", "gossip", "stream"]) },
    },
    {
      name: "no-testkit-in-package-sources",
      severity: "error",
      comment:
        "The test kit is for tests only: nothing under packages/*/src imports it (the test kit itself excepted).",
      from: {
        path: "^packages/[^/]+/src/",
        pathNot: ["^packages/testkit/"],
      },
      to: { path: ourPackage(["testkit"]) },
    },
    {
      name: "no-test-code-in-package-sources",
      severity: "error",
      comment: "No package source imports from the top-level test/ or from any package's test/.",
      from: { path: "^packages/[^/]+/src/" },
      to: { path: "^(test/|packages/[^/]+/test/)" },
    },
    {
      name: "nothing-but-tests-and-scripts-imports-the-simulation",
      severity: "error",
      comment:
        "The whole-protocol simulation (@geoquota/simulator, packages/simulator/) is test code: no package source imports it; tests and scripts/ do.",
      from: { path: "^packages/[^/]+/src/", pathNot: ["^packages/simulator/"] },
      to: { path: ourPackage(["simulator"]) },
    },
    {
      name: "no-cli-in-lower-package-tests",
      severity: "error",
      comment:
        "A package's tests never import the CLI, which sits above every package (that would be a workspace cycle).",
      from: { path: "^packages/(?!cli/)[^/]+/test/" },
      to: { path: ourPackage(["cli"]) },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist|\\.tmp)/" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    // Workspace packages resolve to their TypeScript sources, as in vitest.
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["@geoquota/source", "import", "node", "default"],
      extensions: [".ts", ".mts", ".js", ".mjs", ".cjs", ".json"],
      mainFields: ["module", "main", "types"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
