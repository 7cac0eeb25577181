// `geoquota policy reset TENANT RESOURCE` and `geoquota policy history`: the key and audit
// admin routes of one region's limiter (packages/limiter/src/admin-routes.ts).
import { AdminError, type AdminTarget, adminCall } from "./admin-client.js";

const out = (s: string) => process.stdout.write(s);
const seg = (s: unknown) => encodeURIComponent(String(s));
const tokens = (n: unknown) => (typeof n === "number" ? String(Math.floor(n * 1000) / 1000) : "?");

interface Summary {
  readonly target?: string | null;
  readonly entry?: unknown;
  readonly tokens?: number;
}
interface Record_ {
  readonly at: string;
  readonly actor: string;
  readonly address: string;
  readonly method: string;
  readonly route: string;
  readonly params?: Readonly<Record<string, string>>;
  readonly status: number;
  readonly before?: Summary;
  readonly after?: Summary;
}

function describe(r: Record_): string {
  const params = Object.entries(r.params ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const change =
    r.before?.tokens !== undefined
      ? `tokens ${tokens(r.before.tokens)} -> ${tokens(r.after?.tokens)}`
      : r.before?.entry !== undefined
        ? `entry ${JSON.stringify(r.before.entry)} -> ${JSON.stringify(r.after?.entry)}`
        : `target ${r.before?.target ?? "none"} -> ${r.after?.target ?? "none"}`;
  return `${r.at}  ${r.actor} from ${r.address}  ${r.method} ${r.route}${params ? ` (${params})` : ""}  ${r.status}  ${change}\n`;
}

export async function runKeyAdmin(target: AdminTarget, opts: Record<string, unknown>): Promise<number> {
  const json = Boolean(opts.json);
  try {
    if (opts.action === "reset") {
      const r = await adminCall(target, "POST", `/v1/quotas/${seg(opts.tenant)}/${seg(opts.resource)}/reset`);
      const b = r.body as { region?: string; before?: number; after?: number; key?: string };
      if (json) out(`${JSON.stringify(b)}\n`);
      else
        out(
          `reset ${String(opts.tenant)}/${String(opts.resource)} in ${b.region ?? "?"}: ` +
            `${tokens(b.before)} -> ${tokens(b.after)} (refills from now; other regions untouched)\n`,
        );
      return 0;
    }
    const limit = (opts.limit as number | undefined) ?? 20;
    const r = await adminCall(target, "GET", `/v1/policy/history?limit=${limit}`);
    const b = r.body as { region?: string; records?: Record_[] };
    if (json) out(`${JSON.stringify(b)}\n`);
    else {
      out(`# region ${b.region ?? "?"}: ${b.records?.length ?? 0} admin changes, newest first\n`);
      for (const rec of b.records ?? []) out(describe(rec));
    }
    return 0;
  } catch (err) {
    if (err instanceof AdminError) {
      process.stderr.write(`geoquota: ${err.message}\n`);
      return err.exitCode;
    }
    throw err;
  }
}
