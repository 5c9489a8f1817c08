/**
 * Replication facts of a throwaway redis-server (test/support/redis-nodes.ts), for the failover
 * tests: a node's `INFO replication`, and a wait until a condition on it holds.
 *
 * What this is *not*: a Sentinel. Promotions are the tests' own `REPLICAOF NO ONE`.
 */
import { Redis } from "ioredis";

/** `INFO replication` of the node on `port` (a fresh connection, no retries). */
export async function replicationInfo(port: number): Promise<string> {
  const admin = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  admin.on("error", () => {});
  try {
    await admin.connect();
    return await admin.info("replication");
  } finally {
    admin.disconnect();
  }
}

/** Polls `check` every 50 ms until it holds; throws naming `what` after `ms`. */
export async function waitUntil(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const start = Date.now();
  while (!(await check().catch(() => false))) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Resolves once the replica on `port` has its link to its primary up. */
export function replicaLinked(port: number): Promise<void> {
  return waitUntil(`the replica on ${port} to reach its primary`, async () => (await replicationInfo(port)).includes("master_link_status:up"));
}
