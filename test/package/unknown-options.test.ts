/**
 * Every options object of the public surface refuses keys it does not know, with an
 * `InvalidOptionError` that names the key (and the option it probably meant): a typo, an option of
 * another store or of a newer version never configures a store or a handler silently. No backend is
 * reached: each constructor is given a stand-in client of the right shape.
 */
import { describe, expect, it } from "vitest";
import { D1Store, DurableObjectStore, KVStore, type SeenSetKV, queueHandler } from "../../entry/cloudflare.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { BatchEngine, InMemoryStore, InvalidOptionError, wrap } from "../../entry/index.js";
import { kafkaHandler, sqsHandler } from "../../entry/lambda.js";
import { batchMetrics } from "../../entry/metrics.js";
import { otelTracing } from "../../entry/tracing.js";
import { PostgresStore } from "../../entry/postgres.js";
import { RedisStore } from "../../entry/redis.js";
import { UpstashRedisStore } from "../../entry/upstash.js";
import { checkOptions, optionKeys } from "../../entry/store-kit.js";
import { caught } from "../support/caught.js";

const scriptClient = { eval: async () => null, evalsha: async () => null };
const pool = { query: async () => ({ rows: [], rowCount: 0 }), connect: async () => ({ query: async () => ({ rows: [], rowCount: 0 }), release() {} }) };
const binding = { idFromName: (name: string) => name, get: () => ({}) as never };
const d1 = { prepare: () => ({}) as never, batch: async () => [] };
const kv = { get: async () => null, put: async () => undefined, delete: async () => undefined } as unknown as SeenSetKV;
const handle = async () => undefined;

/** The error `make` throws, which must be an InvalidOptionError naming `key`. */
function refused(make: () => unknown, key: string): InvalidOptionError {
  const error = caught(make);
  expect(error).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(key);
  return error as InvalidOptionError;
}

describe("unknown option keys are refused, by name", () => {
  const cases: [string, () => unknown, string][] = [
    ["RedisStore { cluster }", () => new RedisStore({ client: scriptClient, cluster: true } as never), "cluster"],
    ["RedisStore { dialect }", () => new RedisStore({ client: scriptClient, dialect: "php" } as never), "dialect"],
    ["UpstashRedisStore { hashTag }", () => new UpstashRedisStore({ client: scriptClient, hashTag: true } as never), "hashTag"],
    ["DynamoDBStore { tableName }", () => new DynamoDBStore({ table: "t", tableName: "t" } as never), "tableName"],
    ["PostgresStore { schema }", () => new PostgresStore({ pool, schema: "x" } as never), "schema"],
    ["DurableObjectStore { shard }", () => new DurableObjectStore(binding, { shard: 2 } as never), "shard"],
    ["D1Store { database }", () => new D1Store(d1, { database: "x" } as never), "database"],
    ["KVStore { leaseMs }", () => new KVStore(kv, { leaseMs: 1 } as never), "leaseMs"],
    ["InMemoryStore { clock }", () => new InMemoryStore({ clock: Date.now } as never), "clock"],
    ["BatchEngine { concurency }", () => new BatchEngine(new InMemoryStore(), handle, { concurency: 2 } as never), "concurency"],
    ["wrap { onConflicts }", () => wrap(new InMemoryStore(), handle, { onConflicts: "drop" } as never), "onConflicts"],
    ["sqsHandler { leaseMarginMS }", () => sqsHandler({ store: new InMemoryStore(), handle, leaseMarginMS: 1 } as never), "leaseMarginMS"],
    ["kafkaHandler { leaseMarginMS }", () => kafkaHandler({ store: new InMemoryStore(), handle, leaseMarginMS: 1 } as never), "leaseMarginMS"],
    ["kafkaHandler { groupBy }", () => kafkaHandler({ store: new InMemoryStore(), handle, groupBy: "partition" } as never), "groupBy"],
    ["queueHandler { retryDelay }", () => queueHandler({ store: () => new InMemoryStore(), handle, retryDelay: 5 } as never), "retryDelay"],
    ["batchMetrics { namespaces }", () => sqsHandler({ store: new InMemoryStore(), handle, metrics: batchMetrics({ namespaces: "x" } as never) }), "namespaces"],
    ["otelTracing { tracers }", () => otelTracing({ api: {}, tracers: 1 } as never), "tracers"],
  ];
  for (const [name, make, key] of cases) {
    it(name, () => {
      refused(make, key);
    });
  }

  it("an explicitly undefined unknown key is refused too: it is still a typo", () => {
    refused(() => new InMemoryStore({ namspace: undefined } as never), "namspace");
  });

  it("the message names the owner and the option the typo probably meant", () => {
    expect(refused(() => new InMemoryStore({ namspace: "x" } as never), "namspace").message).toBe(
      'option "namspace" is not an option of InMemoryStore (did you mean "namespace"?)',
    );
    expect(refused(() => new RedisStore({ client: scriptClient, cluster: true } as never), "cluster").message).toBe(
      'option "cluster" is not an option of RedisStore (its options: buckets, client, hashTag, layout, leaseMs, namespace, prefix, previousBuckets, retentionMs, timeoutMs, waitReplicas, waitTimeoutMs)',
    );
    expect(refused(() => new KVStore(kv, { RetentionMs: 1 } as never), "RetentionMs").message).toMatch(/did you mean "retentionMs"\?/);
    expect(refused(() => kafkaHandler({ store: new InMemoryStore(), handle, leaseMarginMS: 1 } as never), "leaseMarginMS").message).toBe(
      'option "leaseMarginMS" is not an option of kafkaHandler (did you mean "leaseMarginMs"?)',
    );
  });

  it("every option the types allow is accepted", () => {
    expect(() => new InMemoryStore({ namespace: "n", now: Date.now, token: () => "t", leaseMs: 1, retentionMs: 1 })).not.toThrow();
    expect(() => new RedisStore({ client: scriptClient, namespace: "n", prefix: "p:", timeoutMs: 1, leaseMs: 1, retentionMs: 1, hashTag: true })).not.toThrow();
    expect(() => new RedisStore({ client: scriptClient, layout: "babelqueue-php", prefix: "p:", timeoutMs: 1, leaseMs: 1, retentionMs: 1 })).not.toThrow();
    expect(() => new KVStore(kv, { namespace: "n", retentionMs: 1, bulkGet: false })).not.toThrow();
    expect(() => sqsHandler({ store: new InMemoryStore(), handle, leaseMarginMs: 0, logger: false, metrics: false, tracing: false, concurrency: 2 })).not.toThrow();
    expect(() => kafkaHandler({ store: new InMemoryStore(), handle, leaseMarginMs: 0, logger: false, metrics: false, tracing: false, concurrency: 2 })).not.toThrow();
  });
});

describe("checkOptions (store kit)", () => {
  type Options = { alpha?: number; beta?: string };
  const keys = optionKeys<Options>({ alpha: true, beta: true });

  it("accepts undefined (no options) and objects of known keys", () => {
    expect(() => checkOptions(undefined, keys, "X")).not.toThrow();
    expect(() => checkOptions<Options>({ alpha: 1 }, keys, "X")).not.toThrow();
  });

  it("refuses what is not an object", () => {
    for (const bad of [null, 1, "x", [1]]) {
      const error = caught(() => checkOptions(bad as never, keys, "X"));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).message).toBe('option "options" of X must be an object');
    }
  });

  it("suggests only a near key (case, or a small edit), else lists the options", () => {
    expect((caught(() => checkOptions({ ALPHA: 1 } as never, keys, "X")) as Error).message).toMatch(/did you mean "alpha"/);
    expect((caught(() => checkOptions({ bets: 1 } as never, keys, "X")) as Error).message).toMatch(/did you mean "beta"/);
    expect((caught(() => checkOptions({ gamma: 1 } as never, keys, "X")) as Error).message).toBe('option "gamma" is not an option of X (its options: alpha, beta)');
  });
});
