import { readFileSync } from "node:fs";
import { Command, type CommanderError, Option } from "commander";
import { parseDuration, parseIntFlag, UsageError } from "./errors.js";

type Lazy = () => Promise<{ run(opts: Record<string, unknown>): Promise<number | undefined> }>;

function action(load: Lazy) {
  return async (opts: Record<string, unknown>) => {
    const mod = await load();
    const code = await mod.run(opts);
    if (typeof code === "number" && code !== 0) process.exitCode = code;
  };
}

/** The CLI package's version (its package.json sits one folder up from src/ and from dist/). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}

/**
 * A command that needs one of the CLI's development dependencies (the bench):
 * from an installed package, a clear error instead of a module-not-found trace.
 */
async function devOnly(pkg: string, command: string): Promise<void> {
  try {
    import.meta.resolve(pkg);
  } catch {
    throw new UsageError(
      `geoquota ${command} runs from a checkout of the repository: it needs ${pkg}, a development dependency of @geoquota/cli that an installed package does not have`,
    );
  }
}

/** Builds the CLI. Commander's own usage errors exit 2, like ours. */
export function buildProgram(): Command {
  const program = new Command("geoquota")
    .description("Multi-region quota coordinator: one global limit, enforced locally in every region")
    // Not commander's .version(): a program option is recognised after a
    // subcommand too, and would swallow `policy status --version <v>`.
    // main.ts answers `geoquota --version` / `-V` given alone.
    .addHelpText("after", "\nGlobal:\n  -V, --version  print the version of geoquota (given alone)")
    .showHelpAfterError()
    .exitOverride((err: CommanderError) => {
      if (
        err.code === "commander.helpDisplayed" ||
        err.code === "commander.version" ||
        err.code === "commander.help"
      )
        process.exit(0);
      process.exit(2);
    });

  program
    .command("region")
    .description("run one region's limiter service (HTTP API) from a config file")
    .requiredOption("--config <file>", "region config, e.g. regions/us-east.json")
    .action(action(() => import("./commands/region.js")));

  program
    .command("gossip")
    .description("run one region's gossip daemon from a config file")
    .requiredOption("--config <file>", "region config, e.g. regions/us-east.json")
    .action(action(() => import("./commands/gossip.js")));

  program
    .command("cluster")
    .description("start N local regions (redis-server, limiter, gossip daemon each) until SIGINT/SIGTERM")
    .addOption(
      new Option("--regions <n>", "number of regions")
        .default(3)
        .argParser((v) => parseIntFlag("--regions", v, 1, 16)),
    )
    .option("--policies <file>", "policies file (default regions/policies.json)")
    .option("--toxiproxy", "put every gossip link and limiter→Redis link behind a Toxiproxy proxy", false)
    .option(
      "--no-rls",
      "leave Envoy's rate limit service (RLS v3, gRPC) off; on by default, each region on a port it picks and reports (`rls` in the JSON line)",
    )
    .option(
      "--json",
      "print one JSON line describing the cluster (URLs, admin token, pids, configs, log files) once every limiter is ready and every gossip daemon up",
      false,
    )
    .option(
      "--logs",
      "also print every process's log lines, prefixed with its name (to stderr with --json; colour only on a terminal without NO_COLOR)",
      false,
    )
    .option(
      "--log-dir <dir>",
      "one log file per process here (default: a new directory under the OS temp dir, printed; kept after stop)",
    )
    .action(action(() => import("./commands/cluster.js")));

  program
    .command("demo")
    .description(
      "the main job: a local cluster with traffic through scenarios, a live view and an HTML report",
    )
    .addOption(
      new Option("--duration <d>", "total duration, e.g. 90s, 2m or 1500ms (a bare number is seconds)")
        .default(90_000, "90s")
        .argParser((v) => parseDuration("--duration", v)),
    )
    .option(
      "--scenario <name>",
      "run one scenario: steady, shift, partition, state-loss, stream, or all",
      "all",
    )
    .option("--no-tty", "plain log lines instead of the live view")
    .option("--report <file>", "HTML report path", "reports/demo.html")
    .action(action(() => import("./commands/demo.js")));

  program
    .command("chaos")
    .description(
      "partition/latency/crash scenarios against a fresh local cluster, with the global-bound oracle",
    )
    .option("--seed <n>", "seed for the randomized schedule", (v) =>
      parseIntFlag("--seed", v, 0, 2 ** 31 - 1),
    )
    .addOption(
      new Option("--duration <d>", "per-scenario duration, e.g. 20s (a bare number is seconds)")
        .default(20_000, "20s")
        .argParser((v) => parseDuration("--duration", v)),
    )
    .option("--scenario <name>", "a scenario name or random (default: all)")
    .option("--report <file>", "JSON report path", "reports/chaos.json")
    .addOption(
      new Option(
        "--soak <d>",
        "one long run instead of the scenarios, e.g. 30m: random faults from the whole catalogue under shifting load, the exact oracle over all of it, resources required flat",
      ).argParser((v) => parseDuration("--soak", v)),
    )
    .option(
      "--report-dir <dir>",
      "the soak's report directory (soak.json, soak.md); default .tmp/soak-<seed>",
    )
    .action(action(() => import("./commands/chaos.js")));

  program
    .command("bench")
    .description("benchmarks side by side (ratios measured in one run)")
    .option("--smoke", "a few seconds per figure; for CI", false)
    .option("--out <file>", "JSON results path", "reports/bench.json")
    .option(
      "--section <names>",
      "only these sections, comma-separated: redis,http,leased,crdt,skew,memory,rls,degraded,footprint,peers,rlqs,redis-cost,scale",
    )
    .action(action(() => devOnly("@geoquota/bench", "bench").then(() => import("./commands/bench.js"))));

  const policy = program
    .command("policy")
    .description(
      "read or change the cluster's policies through any region's admin API (rolled out to every region)",
    )
    .option("--url <url>", "a region's limiter URL, e.g. http://127.0.0.1:7101")
    .option("--token <token>", "the admin token (default: $GEOQUOTA_ADMIN_TOKEN)")
    .option("--config <file>", "a region config: its listen address and adminToken instead of --url/--token")
    .option("--json", "print JSON", false);
  // Each action gets the parent's connection flags merged with its own flags and arguments.
  const policyAction =
    (name: string, args: readonly string[] = []) =>
    async (...given: unknown[]) => {
      const cmd = given[given.length - 1] as Command;
      const opts: Record<string, unknown> = { ...cmd.optsWithGlobals(), action: name };
      args.forEach((a, i) => {
        opts[a] = given[i];
      });
      await action(() => import("./commands/policy.js"))(opts);
    };
  policy
    .command("get")
    .description("the version the cluster rolls out (or runs) and its policies document")
    .action(policyAction("get"));
  policy
    .command("status")
    .description("the rollout: target version, each region's acknowledgement, phase")
    .addOption(
      new Option(
        "--wait <d>",
        "wait until the version (--version, else this region's target) arrived in every region: completed here, acked by all; exit 1 on timeout",
      ).argParser((v) => parseDuration("--wait", v)),
    )
    .option("--version <v>", "the version to wait for, as `set`/`apply` print it (v3@us-east#1f2e3d4c)")
    .action(policyAction("status"));
  const waitOption = () =>
    new Option(
      "--wait <d>",
      "wait until the proposed version arrived in every region; exit 1 on timeout",
    ).argParser((v) => parseDuration("--wait", v));
  policy
    .command("apply <file>")
    .description(
      "propose a whole policies document (refused whole, naming the field, when invalid); it is based on --base, or on the version read just before sending, and refused when the cluster moved past that",
    )
    .option(
      "--base <v>",
      "the version the file was based on (`policy get` prints it); sent as If-Match (default: the newest version, read first)",
    )
    .addOption(waitOption())
    .action(policyAction("apply", ["file"]));
  policy
    .command("set <tenant> <resource> <spec>")
    .description(
      `propose one entry, e.g. set cust_a checkout '{"capacity":100,"refillPerSecond":10}' (merged with concurrent edits of other entries)`,
    )
    .addOption(waitOption())
    .action(policyAction("set", ["tenant", "resource", "spec"]));
  policy
    .command("reset <tenant> <resource>")
    .description(
      "restart one key's state EMPTY in the region asked (never full: the global bound holds); run it per region",
    )
    .action(policyAction("reset", ["tenant", "resource"]));
  policy
    .command("history")
    .description(
      "the region's audit records of admin changes (who, from where, what, before/after), newest first",
    )
    .option(
      "--limit <n>",
      "at most this many records (1-1000)",
      (v) => parseIntFlag("--limit", v, 1, 1000),
      20,
    )
    .action(policyAction("history"));
  policy
    .command("delete <tenant> <resource>")
    .description(
      "propose removing one entry (tenant '*': the resource's default); its keys fall back to the resource's default, then the global one",
    )
    .addOption(waitOption())
    .action(policyAction("delete", ["tenant", "resource"]));
  policy
    .command("import <files...>")
    .description(
      "read envoyproxy/ratelimit YAML configs as they are and print what geoquota enforces per rule (file:line on anything it cannot)",
    )
    .option("--token-bucket", "geoquota's token bucket instead of the epoch-aligned fixed window", false)
    .addOption(
      new Option("--burst <n>", "token bucket capacity (default requests_per_unit)").argParser((v) =>
        parseIntFlag("--burst", v, 1, 4_294_967_295),
      ),
    )
    .action(async (files: string[], _o: unknown, cmd: Command) => {
      await action(() => import("./commands/policy-import.js"))({ ...cmd.optsWithGlobals(), files });
    });
  policy
    .command("diff <file>")
    .description("what applying a policies file would change")
    .option("--exit-code", "exit 1 when there are changes", false)
    .action(policyAction("diff", ["file"]));

  return program;
}

export { UsageError };
