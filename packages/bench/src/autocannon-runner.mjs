// Child process of the HTTP bench (plain JS: runs without the TS loader, and
// keeps the load generator off the server's event loop). argv[2] is JSON:
// { url, path, rate (req/s, 0 = as fast as possible), durationS, connections,
//   keys, instances }. Prints one JSON line: { requests, non2xx, errors,
//   elapsedS, latenciesMs: { p50, p99, p999 } }.
//
// autocannon's rate limit is a per-connection quota per second, sent
// back-to-back when each second starts. A fixed rate is therefore split over
// `instances` one-connection autocannon runs whose seconds start staggered
// across the second, so the load arrives spread out rather than as one burst.
import autocannon from "autocannon";

const o = JSON.parse(process.argv[2] ?? "{}");
const LAT_MAX = 2_000_000;
const lat = [];
let requests = 0;
let non2xx = 0;
let errors = 0;

function start(rate, connections) {
  let k = Math.floor(Math.random() * o.keys);
  const inst = autocannon({
    url: o.url,
    connections,
    duration: o.durationS,
    ...(rate > 0 ? { connectionRate: rate } : {}),
    requests: [
      {
        method: "POST",
        path: o.path,
        headers: { "content-type": "application/json" },
        setupRequest: (req) => {
          k = (k + 1) % o.keys;
          return { ...req, body: `{"tenant":"h${k}","resource":"api"}` };
        },
      },
    ],
  });
  inst.on("response", (_client, status, _bytes, ms) => {
    requests++;
    if (status < 200 || status > 299) non2xx++;
    if (lat.length < LAT_MAX) lat.push(ms);
  });
  inst.on("reqError", () => {
    errors++;
  });
  return new Promise((resolve) => inst.on("done", resolve));
}

const t0 = performance.now();
const runs = [];
if (o.rate > 0) {
  const perInstance = Math.max(1, Math.round(o.rate / o.instances));
  for (let i = 0; i < o.instances; i++) {
    runs.push(start(perInstance, 1));
    await new Promise((r) => setTimeout(r, 1000 / o.instances));
  }
} else runs.push(start(0, o.connections));
await Promise.all(runs);
const elapsedS = (performance.now() - t0) / 1000;
lat.sort((a, b) => a - b);
const q = (p) => (lat.length === 0 ? 0 : lat[Math.min(lat.length - 1, Math.ceil(p * lat.length) - 1)]);
process.stdout.write(
  `${JSON.stringify({ requests, non2xx, errors, elapsedS, latenciesMs: { p50: q(0.5), p99: q(0.99), p999: q(0.999) } })}\n`,
);
