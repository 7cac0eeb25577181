// `geoquota` command line. Each subcommand lives in commands/; this file only
// wires them and maps errors to exit codes (2: bad flag or config).
import { ConfigError } from "@geoquota/config";
import { buildProgram } from "./program.js";

const program = buildProgram();
try {
  await program.parseAsync(process.argv);
} catch (err) {
  const code = err instanceof ConfigError ? 2 : (err as { exitCode?: number }).exitCode;
  process.stderr.write(`geoquota: ${(err as Error).message}\n`);
  process.exit(typeof code === "number" ? code : 1);
}
