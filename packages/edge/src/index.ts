// Public API of @geoquota/edge: the process edge the limiter and the daemon
// share, without the spawners of @geoquota/procs (so a library user of the
// limiter installs no Toxiproxy client): binding a listener without a port race
// (listen.ts) and a process's own metrics (process-metrics.ts).
export { bindWithFallback, isAddressInUse, type ListenOptions, listenServer } from "./listen.js";
export { collectProcessMetrics } from "./process-metrics.js";
