// Public API of @geoquota/procs: the server processes of a local cluster
// (redis-server, a Redis Cluster, Toxiproxy, any long-running child), started
// on free loopback ports, tracked and stopped even on Ctrl-C. Used by the CLI
// (`geoquota cluster`, demo, chaos, bench) and, through the test kit, by tests.
// The process edge the limiter and the daemon share (listening, process
// metrics) is @geoquota/edge.
export { findBinary, repoRoot } from "./binaries.js";
export {
  bindRetrying,
  candidatePort,
  ephemeralRange,
  freePort,
  isLoopback,
  listeningPorts,
  PortTakenError,
} from "./ports.js";
export {
  livePids,
  type ManagedProcess,
  type SpawnOptions,
  spawnManaged,
  stopAll,
} from "./processes.js";
export {
  type RedisServer,
  type StartRedisOptions,
  startRedis,
  startRedisServers,
  startReplica,
} from "./redis.js";
export { type RedisClusterServers, startRedisCluster } from "./redis-cluster.js";
export { startToxiproxy, type ToxiproxyServer } from "./toxiproxy.js";
export { waitFor } from "./wait.js";
