#!/usr/bin/env node
// Bundles the CLI's built JS (packages/cli/dist, from tsc) with esbuild, one
// file per process kind, into packages/cli/dist/bundle/:
//   main.js             the command line (commander); loads one command file
//   commands/<name>.js  each subcommand with everything it imports
// A local cluster starts six node processes at once; loading ~600 modules
// each from node_modules dominated its start time, one file each is ~3× less
// CPU. Run by scripts/build.sh after tsc.
//
// Three things keep the bundle's behaviour that of the unbundled dist:
// - workspace modules are declared free of import side effects (they are:
//   declarations only), so a process does not load what it never calls: the
//   gossip daemon imports a few functions of @geoquota/limiter, not its
//   Fastify app;
// - `import.meta.url` in a workspace module still means that module's own
//   file (the Lua, the bin, bench runners are found relative to it): it is
//   rewritten to the original file's URL, through the package's resolved
//   location for other packages, so it holds in an installed tarball too;
// - CommonJS dependencies get a real `require` (createRequire) for the Node
//   built-ins they load.
//
// Memory (issue 24 point 8): V8 keeps each file's source text in the heap, and
// a file with one non-ASCII character (a `≤` in a comment) is held at two bytes
// a character. So the output is whitespace- and syntax-minified (comments go;
// names stay, so a stack trace still names its functions; GQ_UNBUNDLED=1 runs
// tsc's dist/ for line-accurate traces), ASCII only, with licence comments in
// a `.LEGAL.txt` beside each file. A dynamic `import()` becomes its own chunk
// (commands/chunk-*.js), loaded only when reached: `region` loads the gRPC RLS
// only when its config has `rls`. What a region without it loads went from
// 4.4 MB of source (held as 8.8 MB of two-byte text) to 2.1 MB.
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const packages = join(root, "packages");
const cliDist = join(packages, "cli", "dist");
const outRoot = join(cliDist, "bundle");

/** packages/<dir>/dist/... → { dir, name, file relative to the package's main entry's folder } */
function workspaceFile(path) {
  const rel = relative(packages, path);
  if (rel.startsWith("..")) return undefined;
  const [dir, sub] = rel.split(sep);
  if (sub !== "dist") return undefined;
  const pkg = JSON.parse(readFileSync(join(packages, dir, "package.json"), "utf8"));
  return { dir, name: pkg.name, main: join(packages, dir, pkg.exports["."].default) };
}

const toPosix = (p) => p.split(sep).join("/");

function plugins(outDir) {
  return [
    {
      name: "geoquota-workspace",
      setup(b) {
        // Relative imports and @geoquota/* specifiers: resolve as usual, then
        // mark workspace files side-effect free.
        b.onResolve({ filter: /^(\.|@geoquota\/)/ }, async (args) => {
          if (args.pluginData?.inner || args.kind === "entry-point") return undefined;
          const r = await b.resolve(args.path, {
            kind: args.kind,
            importer: args.importer,
            resolveDir: args.resolveDir,
            pluginData: { inner: true },
          });
          if (r.errors.length > 0 || r.external) return r;
          return workspaceFile(r.path) ? { ...r, sideEffects: false } : r;
        });
        b.onLoad({ filter: /\.js$/ }, (args) => {
          const ws = workspaceFile(args.path);
          if (!ws) {
            // A dependency that finds its own files by __dirname (grpc-health-check loads its
            // .proto so): keep pointing at its installed folder, not at the bundle's.
            if (!args.path.includes(`${sep}node_modules${sep}`)) return undefined;
            const source = readFileSync(args.path, "utf8");
            if (!/\b__(dirname|filename)\b/.test(source)) return undefined;
            const contents = source
              .replace(/\b__dirname\b/g, JSON.stringify(dirname(args.path)))
              .replace(/\b__filename\b/g, JSON.stringify(args.path));
            return { contents, loader: "js" };
          }
          const source = readFileSync(args.path, "utf8");
          if (!source.includes("import.meta.url")) return undefined;
          // The CLI's own files keep their place relative to the bundle; a
          // file of another package is found from that package's entry.
          const url =
            ws.name === "@geoquota/cli"
              ? `new URL(${JSON.stringify(toPosix(relative(outDir, args.path)))}, import.meta.url).href`
              : `new URL(${JSON.stringify(toPosix(relative(dirname(ws.main), args.path)))}, import.meta.resolve(${JSON.stringify(ws.name)})).href`;
          return { contents: source.replaceAll("import.meta.url", url), loader: "js" };
        });
      },
    },
  ];
}

const common = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  logLevel: "warning",
  minifyWhitespace: true,
  minifySyntax: true,
  charset: "ascii",
  legalComments: "linked",
  banner: {
    js: 'import { createRequire as __gqCreateRequire } from "node:module"; const require = __gqCreateRequire(import.meta.url);',
  },
};

rmSync(outRoot, { recursive: true, force: true });
const commands = readdirSync(join(cliDist, "commands")).filter((f) => f.endsWith(".js"));
const builds = [
  // The command line itself; each command is loaded from its own bundle.
  build({
    ...common,
    entryPoints: [join(cliDist, "main.js")],
    outfile: join(outRoot, "main.js"),
    plugins: [
      {
        name: "geoquota-commands-external",
        setup(b) {
          b.onResolve({ filter: /^\.\/commands\/[\w-]+\.js$/ }, (args) =>
            args.importer === join(cliDist, "program.js") ? { path: args.path, external: true } : undefined,
          );
        },
      },
      ...plugins(outRoot),
    ],
  }),
  ...commands.map((f) =>
    build({
      ...common,
      entryPoints: [join(cliDist, "commands", f)],
      // Chunks sit beside the command, so import.meta.url means the same folder in both.
      outdir: join(outRoot, "commands"),
      splitting: true,
      chunkNames: "chunk-[hash]",
      plugins: plugins(join(outRoot, "commands")),
    }),
  ),
];
await Promise.all(builds);
for (const f of ["main.js", ...commands.map((c) => `commands/${c}`)])
  if (!existsSync(join(outRoot, f))) throw new Error(`bundle: ${f} was not written`);
