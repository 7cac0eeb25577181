// `geoquota policy get | set | apply FILE | diff FILE | status` against any
// region's admin API (docs/design.md §3.4): a change is proposed in one region
// and rolled out to every region by gossip; `status --wait` follows it.
import { readJsonFile } from "@geoquota/config";
import { UsageError } from "../errors.js";
import { AdminError, adminCall, adminTarget } from "../policy/admin-client.js";
import { diffPolicies, formatChanges } from "../policy/diff.js";

interface VersionId {
  readonly version: number;
  readonly origin: string;
}
interface PolicyState {
  readonly region: string;
  readonly replicated: boolean;
  readonly phase: string;
  readonly target: VersionId | null;
  readonly completed: VersionId | null;
  readonly growAtUs: number | null;
  readonly policies: Record<string, unknown> | null;
  readonly regions: readonly { id: string; acked: VersionId | null }[];
}

const vid = (v: VersionId | null | undefined): string => (v ? `v${v.version}@${v.origin}` : "none");
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

/** Every region acknowledged the target and this region completed it. */
const settled = (s: PolicyState): boolean =>
  s.phase === "stable" &&
  s.target !== null &&
  s.regions.every((r) => r.acked !== null && vid(r.acked) === vid(s.target));

export async function run(opts: Record<string, unknown>): Promise<number> {
  const target = adminTarget(opts);
  const json = Boolean(opts.json);
  const getState = async () => (await adminCall(target, "GET", "/v1/policy")).body as unknown as PolicyState;
  try {
    switch (opts.action) {
      case "get": {
        const s = await getState();
        if (json) out(`${JSON.stringify(s)}\n`);
        else {
          out(`# ${vid(s.target)} (${s.phase})\n`);
          out(`${JSON.stringify(s.policies, null, 2)}\n`);
        }
        return 0;
      }
      case "status": {
        const waitMs = opts.wait as number | undefined;
        let s = await getState();
        if (waitMs !== undefined) {
          const deadline = Date.now() + waitMs;
          while (!settled(s) && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 200));
            s = await getState();
          }
        }
        if (json) out(`${JSON.stringify(s)}\n`);
        else printState(s);
        if (waitMs !== undefined && !settled(s)) {
          process.stderr.write(
            `geoquota: the rollout of ${vid(s.target)} did not settle within ${waitMs} ms\n`,
          );
          return 1;
        }
        return 0;
      }
      case "apply":
      case "set": {
        const r =
          opts.action === "apply"
            ? await adminCall(target, "PUT", "/v1/policy", readPoliciesFile(String(opts.file)))
            : await adminCall(
                target,
                "PUT",
                `/v1/policies/${encodeURIComponent(String(opts.tenant))}/${encodeURIComponent(String(opts.resource))}`,
                parseSpec(String(opts.spec)),
              );
        const b = r.body as { unchanged?: boolean; proposalId?: string; state?: PolicyState };
        if (json) out(`${JSON.stringify(b)}\n`);
        else if (b.unchanged) out(`no change: the cluster already runs ${vid(b.state?.target)}\n`);
        else if (b.state?.target)
          out(`proposed ${vid(b.state.target)}; follow it with: geoquota policy status --wait 30s\n`);
        else out(`proposal ${b.proposalId ?? "?"} queued for the gossip daemon\n`);
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

function parseSpec(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`spec: expected a JSON policy, e.g. '{"capacity":100,"refillPerSecond":10}'`);
  }
}
