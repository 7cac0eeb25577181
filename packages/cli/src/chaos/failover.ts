// A failover behind one address (issue 26 point 5), as production does it and
// as packages/limiter/test/failover-one-address.int.test.ts does it: the
// region's limiter and daemon reach their Redis through proxies (the soak's
// cluster runs with `daemonRedisProxy`: `redis_<id>` and `redisd_<id>`, one
// address for both, as a VIP or a DNS name), a replica is attached to the
// primary, the address is moved to the replica (existing connections cut, the
// clients reconnect through the same address), the replica promoted once it
// has everything the old primary took, and the old primary killed. The heal
// fails back the same way onto the region's own server (restarted empty on
// its port, synced from the promoted replica), so later faults find the
// region's Redis where they expect it.
//
// Between the address move and the promotion the region's processes reach a
// replica, which just after a diskless full sync (the failback's) serves its
// snapshot for up to ~1 s before the stream starts: writes fail there
// (READONLY) and so do views (lua/inspect.lua refuses on a replica), as in
// production when a VIP moves before the promotion. `steps` (the soak
// report's fault timeline) shows each phase's time.
//
// Controlled, so nothing is lost: the address moves before the promotion and
// the promotion waits until the replica holds the primary's whole replication
// stream (no process writes to the old primary once the address moved). The
// cluster declares no replicas (`redis.replicas` 0), so while a replica is
// attached the region fails closed (§1.2: more connected replicas than
// declared is drift), and the promotion changes the replication id every
// process watches (§4.5).
import { type RedisServer, startReplica, type StartRedisOptions, waitFor } from "@geoquota/procs";
import type { Toxiproxy } from "toxiproxy-node-client";
import { daemonRedisProxyName, redisProxyName } from "../cluster/ids.js";
import { whileBusy } from "../cluster/proxies.js";

function field(info: string, name: string): string {
  return new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim() ?? "";
}

/** Points the region's one Redis address (the limiter's and the daemon's proxies) at `to`. */
async function moveAddress(api: Toxiproxy, region: string, to: RedisServer): Promise<void> {
  for (const name of [redisProxyName(region), daemonRedisProxyName(region)]) {
    await whileBusy(async () => {
      const p = await api.get(name);
      await p.update({ enabled: p.enabled, listen: p.listen, upstream: `${to.host}:${to.port}` });
    });
  }
}

/** Moves the address from `from` (the primary) to `to` (its replica), then promotes `to` once it caught up. */
async function switchOver(
  api: Toxiproxy,
  region: string,
  from: RedisServer,
  to: RedisServer,
  step: (what: string) => void,
): Promise<void> {
  step(`address moving to ${to.port}`);
  await moveAddress(api, region, to);
  step(`address at ${to.port}`);
  const a = from.client();
  const b = to.client();
  try {
    await waitFor(
      `${region}: replica ${to.port} holding everything primary ${from.port} took`,
      async () => {
        const target = Number(field(await a.info("replication"), "master_repl_offset"));
        const info = await b.info("replication");
        return (
          field(info, "master_link_status") === "up" && Number(field(info, "slave_repl_offset")) >= target
        );
      },
      30_000,
      20,
    );
    step(`${to.port} caught up`);
    await b.replicaof("NO", "ONE");
    step(`${to.port} promoted`);
  } finally {
    a.disconnect();
    b.disconnect();
  }
}

export interface FailedOver {
  /** Fails back onto the region's own server (restarted empty on its port, synced, promoted). */
  failBack(): Promise<void>;
}

/** Replaces `primary` by a replica behind the region's one address; `launch`: the replica's binary and env. */
export async function failOver(
  api: Toxiproxy,
  region: string,
  primary: RedisServer,
  launch: Pick<StartRedisOptions, "binary" | "env">,
  step: (what: string) => void = () => {},
): Promise<FailedOver> {
  const replica = await startReplica(primary, launch);
  step(`replica ${replica.port} attached`);
  try {
    await switchOver(api, region, primary, replica, step);
    await primary.kill();
    step(`${primary.port} killed`);
  } catch (err) {
    await moveAddress(api, region, primary).catch(() => {});
    await replica.stop();
    throw err;
  }
  return {
    async failBack() {
      step(`failback: restarting ${primary.port}`);
      await primary.restart();
      step(`${primary.port} restarted`);
      const back = primary.client();
      const admin = replica.client();
      try {
        await admin.config("SET", "repl-diskless-sync-delay", "0");
        await back.config("SET", "repl-diskless-load", "on-empty-db");
        await back.replicaof(replica.host, String(replica.port));
        await waitFor(
          `${region}: ${primary.port} synced from the promoted ${replica.port}`,
          async () => field(await back.info("replication"), "master_link_status") === "up",
          30_000,
          50,
        );
        step(`${primary.port} synced`);
      } finally {
        back.disconnect();
        admin.disconnect();
      }
      await switchOver(api, region, replica, primary, step);
      await replica.stop();
      step(`${replica.port} stopped`);
    },
  };
}
