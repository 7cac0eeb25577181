import type { Toxiproxy } from "toxiproxy-node-client";

/** Disabling a proxy closes its connections and refuses new ones: a dead link. */
export async function setProxiesEnabled(
  api: Toxiproxy,
  proxies: readonly string[],
  enabled: boolean,
): Promise<void> {
  await Promise.all(
    proxies.map(async (name) => {
      const p = await api.get(name);
      await p.update({ enabled, listen: p.listen, upstream: p.upstream });
    }),
  );
}
