/**
 * vitest globalSetup: a real Redis Cluster on loopback for the Redis Cluster tests — 3 masters, one
 * replica each (the durable-commit test waits for them), Debian's redis-server in cluster mode on
 * free ports, created with `redis-cli --cluster create ... --cluster-yes` (test/support/redis-nodes.ts).
 * Provides `redisClusterPorts` (every node; any is a seed for ioredis' `Cluster`) and
 * `redisClusterMasters` (the masters' ports at start), and stops every node afterwards — also when
 * the run crashes or is killed (a process `exit` hook, and a watchdog per node that outlives only
 * its parent).
 *
 * Tests may move slots (test/stores/redis/cluster-migration.test.ts reshards while batches run):
 * read the slot map from the cluster, never assume the one at start.
 *
 * What this is *not*: a cluster for anything but tests — loopback only, no persistence.
 */
import type { TestProject } from "vitest/node";
import { startRedisCluster } from "../support/redis-nodes.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Ports of every node of the test Redis Cluster on 127.0.0.1. */
    redisClusterPorts: number[];
    /** Ports of its masters when the run started. */
    redisClusterMasters: number[];
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  project.provide(
    "redisClusterPorts",
    cluster.nodes.map((node) => node.port),
  );
  project.provide("redisClusterMasters", cluster.masterPorts);
  return () => cluster.stop();
}
