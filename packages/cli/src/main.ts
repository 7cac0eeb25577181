// `geoquota` command line. Each subcommand lives in commands/; this file only
// wires them and maps errors to exit codes (2: bad flag or config).
import { CONFIG_ERROR_CODE } from "@geoquota/config";
import { buildProgram, cliVersion } from "./program.js";
import { guardStdout } from "./stdout.js";

guardStdout();
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${cliVersion()}\n`);
  process.exit(0);
}
const program = buildProgram();
try {
  await program.parseAsync(process.argv);
} catch (err) {
  // By code, not instanceof: in the bundled CLI each command is its own file
  // with its own copy of the config package (scripts/bundle.mjs).
  const e = err as { code?: unknown; exitCode?: number };
  const code = e.code === CONFIG_ERROR_CODE ? 2 : e.exitCode;
  process.stderr.write(`geoquota: ${(err as Error).message}\n`);
  process.exit(typeof code === "number" ? code : 1);
}
