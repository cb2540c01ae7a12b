import type { Cluster, Redis } from 'ioredis';

/** The only `maxmemory-policy` under which Redis never drops a key to free memory. */
export const SAFE_EVICTION_POLICY = 'noeviction';

/**
 * The `maxmemory-policy` of the Redis behind `client` when it may evict our records, else
 * undefined: `noeviction` everywhere, or unknown because `CONFIG` is disabled or not permitted
 * (managed Redis often renames it away), which is not worth a warning. On a Cluster every master
 * is asked and the first policy that evicts is returned. Every `volatile-*` policy counts: every
 * record has a TTL, so all of them are candidates, and `volatile-ttl` picks in-progress claims
 * first (the shortest TTLs).
 */
export async function evictingPolicy(client: Redis | Cluster): Promise<string | undefined> {
  const nodes = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  const policies = await Promise.all(
    nodes.map((node) =>
      (node.config('GET', 'maxmemory-policy') as Promise<unknown>).then(
        (reply) => (Array.isArray(reply) ? (reply[1] as unknown) : undefined),
        () => undefined,
      ),
    ),
  );
  return policies.find(
    (policy): policy is string => typeof policy === 'string' && policy !== SAFE_EVICTION_POLICY,
  );
}

/** The warning logged at boot (and reported by the health indicator) for an evicting policy. */
export function evictionWarning(policy: string): string {
  return (
    `Redis maxmemory-policy is ${policy}: under memory pressure Redis may evict in-progress ` +
    `claims and stored responses, and a retry then runs the handler again. Set it to ` +
    `${SAFE_EVICTION_POLICY} on the Redis this module uses (size maxmemory with headroom).`
  );
}
