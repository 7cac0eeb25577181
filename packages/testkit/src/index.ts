export { findBinary, repoRoot } from "./binaries.js";
export {
  type Admission,
  checkGlobalBound,
  matchRefunds,
  type OracleLimit,
  type OracleVerdict,
  type Refund,
} from "./oracle.js";
export { freePort, isLoopback } from "./ports.js";
export { livePids, type ManagedProcess, spawnManaged, stopAll } from "./processes.js";
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
