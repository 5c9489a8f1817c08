/**
 * Durable commits (`waitReplicas`) against real redis-servers:
 *   - a failover right after commits, on a primary + replica pair of this file's own (the replica
 *     reaches its primary through scripts/tcp-proxy.ts, so the link between them can be cut — a
 *     real partition: what the primary sends after the cut never arrives). Batches commit while the
 *     link is up, then while it is cut; the primary is killed (SIGKILL) and the replica promoted
 *     (`REPLICAOF NO ONE`). Counted: ids reported `ran` (acknowledged as committed) that the promoted
 *     replica does not have — with and without `waitReplicas: 1`;
 *   - the WAIT rides in the commit's own round trip (one write on the socket: EVALSHA + WAIT);
 *   - on the Redis Cluster of test/setup/redis-cluster.ts (one replica per master): `waitReplicas: 1`
 *     commits, `waitReplicas: 2` fails naming the replicas reached;
 *   - the options it refuses.
 */
import { Cluster, Redis } from "ioredis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import { startTcpProxy } from "../../../scripts/tcp-proxy.js";
import type { MessageResult } from "../../../src/decision.js";
import { CountingConsumer, idRange, statusCounts } from "../../support/redis-batches.js";
import { type RedisNode, startRedisNode } from "../../support/redis-nodes.js";
import { replicaLinked, replicationInfo, waitUntil } from "../../support/redis-replication.js";
import { startRespProxy } from "../../support/resp-proxy.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A primary and a replica that reaches it through a proxy that can cut the link. */
async function primaryAndReplica() {
  const primary = await startRedisNode();
  cleanups.push(() => primary.stop());
  const link = await startTcpProxy({ targetPort: primary.port });
  cleanups.push(() => link.close());
  const replica = await startRedisNode({ args: ["--replicaof", "127.0.0.1", String(link.port), "--repl-timeout", "60"] });
  cleanups.push(() => replica.stop());
  await replicaLinked(replica.port);
  return { primary, replica, link };
}

interface FailoverFigures {
  ranBeforeCut: number;
  reportedDuringCut: Record<string, number>;
  acknowledgedAsCommitted: number;
  lost: number;
  /** Keys (claims and commits) the replica held when it was promoted. */
  replicaKeys: number;
}

/** Commits through the engine, cuts the link, commits more, kills the primary, promotes the replica. */
async function failover(waitReplicas: number): Promise<FailoverFigures> {
  const { primary, replica, link } = await primaryAndReplica();
  const client = new Redis({ host: "127.0.0.1", port: primary.port, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on("error", () => {});
  cleanups.push(() => client.disconnect());
  const namespace = `failover-${waitReplicas}`;
  const store = new RedisStore({
    client: ioredisScriptClient(client),
    namespace,
    timeoutMs: 2_000,
    ...(waitReplicas > 0 ? { waitReplicas, waitTimeoutMs: 200 } : {}),
  });
  const consumer = new CountingConsumer(store, new Map());
  const results: MessageResult[] = [];
  for (let batch = 0; batch < 5; batch += 1) results.push(...(await consumer.process(idRange(`up-${batch}`, 10))));
  const ranBeforeCut = results.filter((r) => r.status === "ran").length;

  link.cut();
  await waitUntil("the primary to lose its replica", async () => (await replicationInfo(primary.port)).includes("connected_slaves:0"));
  const duringCut: MessageResult[] = [];
  for (let batch = 0; batch < 3; batch += 1) duringCut.push(...(await consumer.process(idRange(`cut-${batch}`, 10))));
  results.push(...duringCut);

  // The failover: the primary dies right after those acknowledgements; the replica takes over.
  await primary.kill();
  const promoted = new Redis({ host: "127.0.0.1", port: replica.port });
  cleanups.push(() => promoted.disconnect());
  const replicaKeys = await promoted.dbsize();
  await promoted.call("REPLICAOF", "NO", "ONE");
  const survivor = new RedisStore({ client: ioredisScriptClient(promoted), namespace });
  const acknowledged = results.filter((r) => r.status === "ran").map((r) => r.key as string);
  const held = await survivor.seenMany(acknowledged);
  return {
    ranBeforeCut,
    reportedDuringCut: statusCounts(duringCut),
    acknowledgedAsCommitted: acknowledged.length,
    lost: held.filter((has) => !has).length,
    replicaKeys,
  };
}

describe("a failover right after commits (primary + replica, the link cut, the primary killed)", () => {
  it("loses acknowledged commits without waitReplicas, none with waitReplicas: 1", { timeout: 90_000 }, async () => {
    const plain = await failover(0);
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    const durable = await failover(1);
    console.info(
      `[redis durability] without waitReplicas: ${plain.acknowledgedAsCommitted} acknowledged as committed, ${plain.lost} lost in the failover ` +
        `(the promoted replica held ${plain.replicaKeys} keys) ` +
        `(during the cut: ${JSON.stringify(plain.reportedDuringCut)}); with waitReplicas: 1: ${durable.acknowledgedAsCommitted} acknowledged, ` +
        `${durable.lost} lost (during the cut: ${JSON.stringify(durable.reportedDuringCut)})`,
    );
    expect(plain.ranBeforeCut).toBe(50);
    expect(plain.reportedDuringCut).toEqual({ ran: 30 });
    // Every commit made during the cut, and any the link had not yet carried when it was cut.
    expect(plain.lost).toBeGreaterThanOrEqual(30);
    expect(durable.ranBeforeCut).toBe(50);
    expect(durable.reportedDuringCut).toEqual({ "commit-failed": 30 });
    expect(durable.lost).toBe(0);
  });
});

describe("the replica wait", () => {
  it("rides in the commit's own round trip: one write carrying EVALSHA and WAIT", async () => {
    const { primary } = await primaryAndReplica();
    const counter = await startRespProxy(primary.port);
    cleanups.push(() => counter.close());
    const client = new Redis({ host: "127.0.0.1", port: counter.port });
    cleanups.push(() => client.disconnect());
    const store = new RedisStore({ client: ioredisScriptClient(client), namespace: `rt-${Date.now().toString(36)}`, waitReplicas: 1 });
    await store.rememberMany(["warm"]);
    counter.reset();
    await store.rememberMany(idRange("c", 10));
    expect(counter.counts.writes).toBe(1);
    expect(Object.fromEntries(counter.counts.commands)).toEqual({ EVALSHA: 1, WAIT: 1 });
    await store.remember("one");
    expect(counter.counts.writes).toBe(2);
  });

  it("fails a commit no replica confirmed, naming what was reached", async () => {
    const alone: RedisNode = await startRedisNode();
    cleanups.push(() => alone.stop());
    const client = new Redis({ host: "127.0.0.1", port: alone.port });
    cleanups.push(() => client.disconnect());
    const store = new RedisStore({ client: ioredisScriptClient(client), namespace: "alone", waitReplicas: 1, waitTimeoutMs: 100 });
    await expect(store.remember("x")).rejects.toMatchObject({
      name: "StoreUnavailableError",
      message: expect.stringContaining("reached 0 of 1 replicas within 100 ms (waitReplicas)"),
    });
    // The write itself landed on the primary: a retried commit is idempotent.
    expect(await store.seen("x")).toBe(true);
  });

  it("waits per master on the cluster: 1 replica each confirms, 2 cannot", async () => {
    const cluster = new Cluster(inject("redisClusterPorts").map((port) => ({ host: "127.0.0.1", port })));
    cluster.on("error", () => {});
    cleanups.push(() => cluster.disconnect());
    const ids = idRange("d", 100);
    const one = new RedisStore({ client: ioredisScriptClient(cluster), namespace: `durable-${Date.now().toString(36)}`, buckets: 16, waitReplicas: 1 });
    await one.rememberMany(ids);
    expect((await one.seenMany(ids)).every(Boolean)).toBe(true);
    const two = new RedisStore({ client: ioredisScriptClient(cluster), namespace: `durable2-${Date.now().toString(36)}`, buckets: 16, waitReplicas: 2, waitTimeoutMs: 100 });
    await expect(two.rememberMany(ids)).rejects.toThrow(/reached 1 of 2 replicas/);
  });

  it("refuses what it cannot do", () => {
    const client = new Redis({ lazyConnect: true });
    const plain = { eval: async () => null, evalsha: async () => null };
    expect(() => new RedisStore({ client: plain, waitReplicas: 1 })).toThrow(/waitReplicas.*ioredisScriptClient/);
    expect(() => new RedisStore({ client: ioredisScriptClient(client), waitReplicas: 1, waitTimeoutMs: 5_000 })).toThrow(/waitTimeoutMs/);
    expect(() => new RedisStore({ client: ioredisScriptClient(client), waitTimeoutMs: 100 })).toThrow(/needs waitReplicas/);
    expect(() => new RedisStore({ client: ioredisScriptClient(client), waitReplicas: -1 })).toThrow(/waitReplicas/);
    expect(() => new RedisStore({ client: ioredisScriptClient(client), waitReplicas: 1.5 })).toThrow(/waitReplicas/);
    client.disconnect();
  });
});
