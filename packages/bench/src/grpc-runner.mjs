// Child process of the RLS bench (plain JS, like autocannon-runner.mjs: runs without
// the TS loader and keeps the load generator off the server's event loop).
// argv[2] is JSON: { address, rate (req/s, 0 = flat out), durationS, concurrency,
// keys }. Prints one JSON line: { requests, ok, overLimit, errors, shed, elapsedS,
// latenciesMs: { p50, p99, p999 } }.
//
// A fixed rate is open loop: requests leave on a schedule whatever the answers (a
// slow answer must not slow what is offered, or the tail hides), at most
// `concurrency` in flight (beyond that a due request is shed and counted). Flat out
// is `concurrency` calls in flight back to back, as the HTTP runner's connections.
// One channel (one HTTP/2 connection), as an Envoy worker keeps to its RLS cluster.
// Each request: the native domain's descriptor tenant=h<k>, resource=api — the same
// keys the HTTP runner sends.
import * as grpc from "@grpc/grpc-js";
import { rlsApi } from "@geoquota/rls";

const o = JSON.parse(process.argv[2] ?? "{}");
const LAT_MAX = 2_000_000;
const TICK_MS = 1;
const lat = [];
let requests = 0;
let ok = 0;
let overLimit = 0;
let errors = 0;
let shed = 0;
let inFlight = 0;
let k = Math.floor(Math.random() * o.keys);

const client = new (rlsApi().Client)(o.address, grpc.credentials.createInsecure());
await new Promise((resolve, reject) =>
  client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())),
);

function call() {
  k = (k + 1) % o.keys;
  const request = {
    domain: "geoquota",
    descriptors: [
      {
        entries: [
          { key: "tenant", value: `h${k}` },
          { key: "resource", value: "api" },
        ],
      },
    ],
  };
  inFlight++;
  const t = performance.now();
  return new Promise((resolve) => {
    client.ShouldRateLimit(request, { deadline: Date.now() + 5000 }, (err, res) => {
      inFlight--;
      requests++;
      if (err) errors++;
      else {
        if (lat.length < LAT_MAX) lat.push(performance.now() - t);
        if (res.overall_code === "OK") ok++;
        else overLimit++;
      }
      resolve();
    });
  });
}

const t0 = performance.now();
const endAt = t0 + o.durationS * 1000;
if (o.rate > 0) {
  // Credit accrues with real time; each tick sends what is due.
  let sent = 0;
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      const due = Math.floor(((Math.min(now, endAt) - t0) / 1000) * o.rate);
      while (sent < due) {
        sent++;
        if (inFlight >= o.concurrency) shed++;
        else void call();
      }
      if (now >= endAt) {
        clearInterval(timer);
        resolve();
      }
    }, TICK_MS);
  });
} else {
  const worker = async () => {
    while (performance.now() < endAt) await call();
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
}
for (let i = 0; i < 200 && inFlight > 0; i++) await new Promise((r) => setTimeout(r, 25));
const elapsedS = (performance.now() - t0) / 1000;
client.close();
lat.sort((a, b) => a - b);
const q = (p) => (lat.length === 0 ? 0 : lat[Math.min(lat.length - 1, Math.ceil(p * lat.length) - 1)]);
process.stdout.write(
  `${JSON.stringify({ requests, ok, overLimit, errors, shed, elapsedS, latenciesMs: { p50: q(0.5), p99: q(0.99), p999: q(0.999) } })}\n`,
);
