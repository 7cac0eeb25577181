// `geoquota policy import FILE...`: reads envoyproxy/ratelimit configs as they are and
// prints what geoquota enforces for each rule (refusing, with file:line, anything it
// cannot enforce as written). The region loads the same files with `rls.configs`.
import { EnvoyConfigError, loadEnvoyConfigs, translate } from "@geoquota/rls";
import { UsageError } from "../errors.js";

export async function run(opts: Record<string, unknown>): Promise<number> {
  const files = (opts.files as string[] | undefined) ?? [];
  if (files.length === 0) throw new UsageError("policy import: expected one or more YAML files");
  const algorithm = opts.tokenBucket === true ? "token_bucket" : "fixed_window";
  const burst = opts.burst as number | undefined;
  if (burst !== undefined && algorithm !== "token_bucket") {
    throw new UsageError(
      "--burst applies to --token-bucket only (a fixed window admits requests_per_unit per unit)",
    );
  }
  let rows: ReturnType<typeof translate>;
  try {
    rows = translate(loadEnvoyConfigs(files), { algorithm, ...(burst !== undefined ? { burst } : {}) });
  } catch (err) {
    if (err instanceof EnvoyConfigError) {
      process.stderr.write(`geoquota policy import: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  if (opts.json === true) {
    process.stdout.write(`${JSON.stringify({ algorithm, rules: rows })}\n`);
    return 0;
  }
  for (const r of rows) {
    const g = r.geoquota;
    const what =
      g === undefined
        ? r.limit === "unlimited"
          ? "no limit"
          : "always over (requests_per_unit 0)"
        : g.algorithm === "fixed_window"
          ? `fixed window ${g.capacity} per ${(g.windowMs ?? 0) / 1000} s (epoch-aligned)`
          : `token bucket C=${g.capacity} r=${g.refillPerSecond}/s`;
    const flags = [r.shadow ? "shadow" : "", r.quota ? "quota_mode" : "", r.name ? `name=${r.name}` : ""]
      .filter((f) => f !== "")
      .join(" ");
    process.stdout.write(
      `${r.at}\t${r.domain}\t${r.descriptor}\t${r.limit}\t${what}${flags ? `\t${flags}` : ""}\n`,
    );
  }
  return 0;
}
