// `geoquota policy get | set | apply FILE | diff FILE | status` against any
// region's admin API (docs/design.md §3.4): a change is proposed in one region
// and rolled out to every region by gossip; `status --wait --version V` (and
// `set`/`apply --wait`) follow one version until it arrived in every region.
import { readJsonFile } from "@geoquota/config";
import { UsageError } from "../errors.js";
import { AdminError, adminCall, adminTarget } from "../policy/admin-client.js";
import { runKeyAdmin } from "../policy/admin-commands.js";
import { diffPolicies, formatChanges } from "../policy/diff.js";
import {
  editOutcome,
  fullId,
  type PolicyState,
  parseVersion,
  settledAt,
  shortId as vid,
  type VersionId,
} from "../policy/versions.js";
const out = (s: string) => process.stdout.write(s);

function readPoliciesFile(file: string): Record<string, unknown> {
  const raw = readJsonFile(file);
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw new UsageError(`${file}: expected a policies document (a JSON object)`);
  return raw as Record<string, unknown>;
}

function printState(s: PolicyState): void {
  out(`region ${s.region}: target ${vid(s.target)}, completed here ${vid(s.completed)}, phase ${s.phase}\n`);
  for (const r of s.regions) out(`  ${r.id}\tacked ${vid(r.acked)}\n`);
}

/** Polls until `want` (default: the region's own target) arrived everywhere, or the deadline. */
async function waitFor(
  getState: () => Promise<PolicyState>,
  waitMs: number,
  want: VersionId | undefined,
): Promise<{ state: PolicyState; settled: boolean }> {
  let s = await getState();
  const deadline = Date.now() + waitMs;
  while (!settledAt(s, want) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    s = await getState();
  }
  return { state: s, settled: settledAt(s, want) };
}

export async function run(opts: Record<string, unknown>): Promise<number> {
  const target = adminTarget(opts);
  const json = Boolean(opts.json);
  const getState = async () => (await adminCall(target, "GET", "/v1/policy")).body as unknown as PolicyState;
  if (opts.action === "reset" || opts.action === "history") return runKeyAdmin(target, opts);
  try {
    switch (opts.action) {
      case "get": {
        const s = await getState();
        if (json) out(`${JSON.stringify(s)}\n`);
        else {
          // The full id: what `apply --base` and `status --version` take.
          out(`# ${s.target === null ? "none" : fullId(s.target)} (${s.phase})\n`);
          out(`${JSON.stringify(s.policies, null, 2)}\n`);
        }
        return 0;
      }
      case "status": {
        const waitMs = opts.wait as number | undefined;
        const want = opts.version === undefined ? undefined : parseVersion("--version", String(opts.version));
        if (want !== undefined && waitMs === undefined) throw new UsageError("--version goes with --wait");
        const { state: s, settled } =
          waitMs === undefined
            ? { state: await getState(), settled: true }
            : await waitFor(getState, waitMs, want);
        if (json) out(`${JSON.stringify(s)}\n`);
        else printState(s);
        if (!settled) {
          process.stderr.write(
            `geoquota: ${vid(want ?? s.target)} did not arrive in every region within ${waitMs} ms\n`,
          );
          return 1;
        }
        return 0;
      }
      case "apply":
      case "set":
      case "delete": {
        const r =
          opts.action === "apply"
            ? await adminCall(target, "PUT", "/v1/policy", readPoliciesFile(String(opts.file)), {
                "if-match": await applyBase(opts, getState),
              })
            : await adminCall(
                target,
                opts.action === "set" ? "PUT" : "DELETE",
                `/v1/policies/${encodeURIComponent(String(opts.tenant))}/${encodeURIComponent(String(opts.resource))}`,
                opts.action === "set" ? parseSpec(String(opts.spec)) : undefined,
              );
        const b = r.body as {
          unchanged?: boolean;
          proposalId?: string;
          proposed?: VersionId;
          state?: PolicyState;
        };
        const waitMs = opts.wait as number | undefined;
        if (b.unchanged || waitMs === undefined || b.proposed === undefined) {
          if (json) out(`${JSON.stringify(b)}\n`);
          else if (b.unchanged) out(`no change: the cluster already runs ${vid(b.state?.target)}\n`);
          else if (b.proposed)
            out(
              `proposed ${vid(b.proposed)}; follow it with: geoquota policy status --wait 30s --version ${fullId(b.proposed)}\n`,
            );
          else out(`proposal ${b.proposalId ?? "?"} queued for the gossip daemon\n`);
          return 0;
        }
        const { state, settled } = await waitFor(getState, waitMs, b.proposed);
        // A concurrent edit of the same entry elsewhere may have won (issue 22): say so.
        const outcome =
          opts.action === "set" || opts.action === "delete"
            ? editOutcome(state, String(opts.tenant), String(opts.resource), b.proposalId ?? "")
            : undefined;
        if (json) out(`${JSON.stringify({ ...b, settled, outcome: outcome ?? null, state })}\n`);
        else if (settled) out(`${vid(b.proposed)} arrived in every region\n`);
        if (!settled) {
          process.stderr.write(
            `geoquota: ${vid(b.proposed)} did not arrive in every region within ${waitMs} ms\n`,
          );
          return 1;
        }
        if (outcome !== undefined && outcome !== "kept") {
          process.stderr.write(
            `geoquota: superseded: a concurrent edit of ${String(opts.tenant)}/${String(opts.resource)} (v${outcome.v}@${outcome.o}, proposal ${outcome.p}) won; the entry holds its value\n`,
          );
          return 1;
        }
        return 0;
      }
      case "diff": {
        const s = await getState();
        const changes = diffPolicies(s.policies ?? {}, readPoliciesFile(String(opts.file)));
        if (json) out(`${JSON.stringify({ target: s.target, changes })}\n`);
        else out(formatChanges(changes));
        return opts.exitCode && changes.length > 0 ? 1 : 0;
      }
      default:
        throw new UsageError(`unknown policy action ${String(opts.action)}`);
    }
  } catch (err) {
    if (err instanceof AdminError) {
      process.stderr.write(`geoquota: ${err.message}\n`);
      return err.exitCode;
    }
    throw err;
  }
}

/**
 * The If-Match of `apply`: a whole document always names the version it was
 * based on (the server answers 428 otherwise): `--base` when given, else the
 * version this command reads just before sending, so a change that lands in
 * between is refused (412), never silently undone. `--base` is the stronger
 * form: it also covers changes made since the file was written.
 */
async function applyBase(
  opts: Record<string, unknown>,
  getState: () => Promise<PolicyState>,
): Promise<string> {
  if (opts.base !== undefined) return `"${fullId(parseVersion("--base", String(opts.base)))}"`;
  const s = await getState();
  if (s.target === null)
    throw new AdminError(503, `region ${s.region} does not know the current policy version yet; retry`);
  return `"${fullId(s.target)}"`;
}

function parseSpec(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`spec: expected a JSON policy, e.g. '{"capacity":100,"refillPerSecond":10}'`);
  }
}
