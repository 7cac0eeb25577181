// The test kit: what test files import. The process spawners live in
// @geoquota/procs (the CLI uses them too) and the global-bound oracle in
// @geoquota/sim; this package gathers them for tests, adds the fixtures many
// test files share (redis-fixture.ts, policy-fixture.ts, store-fixture.ts), and is never a dependency of a shipped
// package.
export {
  bindRetrying,
  candidatePort,
  findBinary,
  isLoopback,
  listeningPorts,
  livePids,
  type ManagedProcess,
  PortTakenError,
  type RedisClusterServers,
  type RedisServer,
  repoRoot,
  type StartRedisOptions,
  spawnManaged,
  startRedis,
  startRedisCluster,
  startRedisServers,
  startReplica,
  startToxiproxy,
  stopAll,
  type ToxiproxyServer,
  waitFor,
} from "@geoquota/procs";
export {
  type Admission,
  checkGlobalBound,
  type LimitSchedule,
  type LimitSegment,
  matchRefunds,
  type OracleLimit,
  type OracleVerdict,
  type Refund,
} from "@geoquota/sim";
export { type CliRun, cliBin, runCli } from "./cli-runner.js";
export { keyPolicy, type PolicyFixture, type PolicyFixtureOptions } from "./policy-fixture.js";
export { type RedisFixture, redisPerFile, startPrimaryWithReplica } from "./redis-fixture.js";
export { policy, receiptRef, sleep, TIMING } from "./store-fixture.js";
