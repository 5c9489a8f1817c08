/**
 * Large batches on Redis (issue 20, item 4, the Redis part): a 10,000-record batch (SQS with a
 * batching window) in one engine step, on a redis-server of this file's own and on the Redis Cluster.
 *
 * Measured and printed: time and heap per message through the engine, Redis memory per remembered
 * id (MEMORY USAGE), the scripts and keys per script each step sends (a proxy counts them at the socket), and how
 * long one script holds the server (SLOWLOG, threshold 0) for 1,000 keys — the chunk size, steps.ts
 * `MAX_KEYS_PER_SCRIPT` — and for 10,000 keys in one script, what an unchunked step would do.
 * Asserted: every message runs once and is committed, no script carries more than 1,000 keys, a
 * step of 10,000 ids is 10 scripts in one round trip's worth of pipelining, and a 10,000-key script
 * blocks the server several times longer than a chunk.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import { CLAIM } from "../../../stores/redis/scripts.js";
import { MAX_KEYS_PER_SCRIPT } from "../../../stores/redis/steps.js";
import { CountingConsumer, idRange, statusCounts } from "../../support/redis-batches.js";
import { type RedisNode, startRedisNode } from "../../support/redis-nodes.js";
import { type RespProxy, startRespProxy } from "../../support/resp-proxy.js";

const figures: string[] = [];
let node: RedisNode;
let proxy: RespProxy;
let redis: Redis;
let admin: Redis;

beforeAll(async () => {
  node = await startRedisNode();
  proxy = await startRespProxy(node.port);
  redis = new Redis({ host: "127.0.0.1", port: proxy.port });
  admin = new Redis({ host: "127.0.0.1", port: node.port });
});
afterAll(async () => {
  redis?.disconnect();
  admin?.disconnect();
  await proxy?.close();
  await node?.stop();
  console.info(`[redis large batches]\n${figures.join("\n")}`);
});

/** The durations (µs) and key counts of the scripts SLOWLOG recorded since the last reset. */
async function scriptTimes(): Promise<{ micros: number; keys: number }[]> {
  const entries = (await admin.call("SLOWLOG", "GET", "100000")) as [number, number, number, string[]][];
  return entries
    .filter((entry) => /^(EVALSHA|EVAL)$/i.test(String(entry[3][0])))
    .map((entry) => ({ micros: Number(entry[2]), keys: Number(entry[3][2]) }));
}

describe("a 10,000-record batch in one step", () => {
  it("on one redis-server: every message runs once, each step is 10 scripts of 1,000 keys, pipelined", { timeout: 120_000 }, async () => {
    const store = new RedisStore({ client: ioredisScriptClient(redis), namespace: "large" });
    const ids = idRange("big", 10_000);
    // Load the scripts first (a fresh server answers the first EVALSHA of each with NOSCRIPT).
    await store.claimMany(["warm"]);
    await store.rememberMany(["warm"]);
    await admin.config("SET", "slowlog-log-slower-than", "0");
    await admin.config("SET", "slowlog-max-len", "100000");
    await admin.call("SLOWLOG", "RESET");
    proxy.reset();
    const effects = new Map<string, number>();
    const consumer = new CountingConsumer(store, effects);
    const heapBefore = process.memoryUsage().heapUsed;
    const started = performance.now();
    const results = await consumer.process(ids);
    const elapsed = performance.now() - started;
    const heapAfter = process.memoryUsage().heapUsed;
    let recordBytes = 0;
    for (const id of ids.slice(0, 100)) recordBytes += Number(await admin.call("MEMORY", "USAGE", await store.key(id)));
    const scripts = await scriptTimes();
    const keysSent = proxy.counts.scriptKeys;

    expect(statusCounts(results)).toEqual({ ran: 10_000 });
    expect(effects.size).toBe(10_000);
    expect((await store.seenMany(ids)).every(Boolean)).toBe(true);
    expect(Math.max(...scripts.map((s) => s.keys))).toBeLessThanOrEqual(MAX_KEYS_PER_SCRIPT);
    // The claim step, and the commits (successes committed in group steps as handlers finish).
    const fullChunks = scripts.filter((s) => s.keys === MAX_KEYS_PER_SCRIPT).length;
    expect(fullChunks).toBeGreaterThanOrEqual(10);
    expect(keysSent).toBe(20_000);
    const longest = Math.max(...scripts.map((s) => s.micros));
    figures.push(
      `one server, 10,000 records in one batch: ${(elapsed / 10_000).toFixed(3)} ms and ${((heapAfter - heapBefore) / 10_000).toFixed(0)} B of heap per message ` +
        `(${elapsed.toFixed(0)} ms in all), ${(recordBytes / 100).toFixed(0)} B of Redis memory per remembered id (MEMORY USAGE); ` +
        `${scripts.length} scripts (${fullChunks} of 1,000 keys; the claim step is 10 of them, the commits group as handlers finish), longest script ${longest} µs`,
    );
  });

  it("on the cluster with 16 buckets: every message runs once", { timeout: 120_000 }, async () => {
    const cluster = new Cluster(inject("redisClusterPorts").map((port) => ({ host: "127.0.0.1", port })));
    cluster.on("error", () => {});
    const store = new RedisStore({ client: ioredisScriptClient(cluster), namespace: `large-${Date.now().toString(36)}`, buckets: 16 });
    const ids = idRange("big", 10_000);
    const effects = new Map<string, number>();
    const started = performance.now();
    const results = await new CountingConsumer(store, effects).process(ids);
    const elapsed = performance.now() - started;
    expect(statusCounts(results)).toEqual({ ran: 10_000 });
    expect((await store.seenMany(ids)).every(Boolean)).toBe(true);
    cluster.disconnect();
    figures.push(`cluster, 16 buckets, 10,000 records in one batch: ${(elapsed / 10_000).toFixed(3)} ms per message (${elapsed.toFixed(0)} ms in all)`);
  });
});

describe("how long one script holds the server", () => {
  it("grows with its keys: 10,000 keys in one script block several times longer than a 1,000-key chunk", async () => {
    const timings = new Map<number, number[]>([
      [1_000, []],
      [10_000, []],
    ]);
    for (let round = 0; round < 3; round += 1) {
      for (const size of [1_000, 10_000]) {
        const keys = idRange(`bq:block-${round}-${size}`, size);
        const tokens = keys.map(() => crypto.randomUUID());
        await admin.call("SLOWLOG", "RESET");
        await admin.eval(CLAIM.source, size, ...keys, "60000", "", ...tokens);
        const [entry] = await scriptTimes();
        timings.get(size)?.push(entry?.micros ?? 0);
      }
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[1] as number;
    const chunk = median(timings.get(1_000) as number[]);
    const whole = median(timings.get(10_000) as number[]);
    figures.push(
      `claim script blocking the server (median of 3): 1,000 keys ${chunk} µs (${(chunk / 1_000).toFixed(1)} µs/key), 10,000 keys ${whole} µs (${(whole / 10_000).toFixed(1)} µs/key)`,
    );
    expect(whole).toBeGreaterThan(3 * chunk);
  });
});
