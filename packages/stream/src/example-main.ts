// Command line for the example (not part of the library API):
//   tsx packages/stream/src/example-main.ts server --redis redis://127.0.0.1:6379 [--fresh]
//       [--policies regions/stream-policies.json] [--port 8090] [--region local]
//   tsx packages/stream/src/example-main.ts client --url ws://127.0.0.1:8090/stream
//       [--tenant cust_free] [--multiple 4] [--frame-bytes 4096] [--seconds 10]
//       [--policies regions/stream-policies.json]
// The server prints nothing per frame; the client prints once a second what
// the server admitted and how much it holds back itself (bufferedAmount).
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadPolicies, lookupPolicy } from "@geoquota/config";
import { connectRegionRedis, initFreshRegion } from "@geoquota/limiter";
import { runFloodClient } from "./example-client.js";
import { startExampleServer } from "./example-server.js";

const out = (line: string) => process.stdout.write(`${line}\n`);

async function server(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      redis: { type: "string", default: "redis://127.0.0.1:6379" },
      policies: { type: "string", default: "regions/stream-policies.json" },
      port: { type: "string", default: "8090" },
      region: { type: "string", default: "local" },
      fresh: { type: "boolean", default: false },
    },
  });
  const policies = loadPolicies(resolve(values.policies), [values.region]);
  if (values.fresh) {
    // Only for a Redis that never held geoquota state (internals.md, "Fresh clusters").
    const r = connectRegionRedis(values.redis);
    await new Promise((ok) => r.once("ready", ok));
    await initFreshRegion(r);
    r.disconnect();
  }
  const s = await startExampleServer({
    redisUrl: values.redis,
    policies,
    regionId: values.region,
    port: Number(values.port),
  });
  out(`stream endpoint ${s.url} (tenant: x-tenant-id header or ?tenant=), metrics ${s.metricsUrl}`);
  const stop = () => void s.close().then(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

async function client(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      url: { type: "string", default: "ws://127.0.0.1:8090/stream" },
      tenant: { type: "string", default: "cust_free" },
      multiple: { type: "string", default: "4" },
      "frame-bytes": { type: "string", default: "4096" },
      seconds: { type: "string", default: "10" },
      policies: { type: "string", default: "regions/stream-policies.json" },
    },
  });
  const policy = lookupPolicy(loadPolicies(resolve(values.policies)), values.tenant, "stream_bytes");
  const rate = policy.refillPerSecond * Number(values.multiple);
  out(
    `tenant ${values.tenant}: limit ${policy.refillPerSecond} B/s (burst ${policy.capacity}); sending ${rate} B/s`,
  );
  let lastPrint = 0;
  let report: { admittedBytes: number } | undefined;
  const r = await runFloodClient({
    url: values.url,
    tenant: values.tenant,
    frameBytes: Number(values["frame-bytes"]),
    bytesPerSecond: rate,
    durationMs: Number(values.seconds) * 1000,
    onTick: (t) => {
      if (t.elapsedMs - lastPrint < 1000) return;
      lastPrint = t.elapsedMs;
      out(
        `t=${(t.elapsedMs / 1000).toFixed(0)}s sent=${t.sentBytes} B, client bufferedAmount=${t.bufferedAmount} B` +
          (report ? `, server admitted=${report.admittedBytes} B` : ""),
      );
    },
    onReport: (rep) => {
      report = rep;
    },
  });
  const admitted = r.lastReport?.admittedBytes ?? 0;
  out(
    `done: sent ${r.sentBytes} B, server admitted ${admitted} B (${(admitted / Number(values.seconds)).toFixed(0)} B/s)`,
  );
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "server") await server(rest);
else if (mode === "client") await client(rest);
else {
  out("usage: example-main.ts server|client [options] (see the file header)");
  process.exitCode = 2;
}
