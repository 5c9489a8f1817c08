/**
 * The claiming stores the reliability suite runs against, each on its real local backend as the
 * test run's global setups started it: DynamoDB Local, PostgreSQL, redis-server (over TCP, and
 * behind the Upstash REST bridge), the Redis Cluster. Each call gives a fresh namespace, so runs
 * never see each other's ids. The network backends can also be reached through a partition proxy,
 * for a real outage (the Cluster through one proxy per node, mapped with the client's natMap).
 *
 * Transactional mode has its own list (`TransactionalBackend`): the store, the handler's write
 * through `ctx.tx`, and the effects counted from the database.
 */
import { DynamoDBClient, ScanCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Cluster, Redis } from "ioredis";
import pg from "pg";
import { inject } from "vitest";
import type { ClaimingStore, TransactionalStore } from "../../src/contract.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { txOf } from "../../src/transaction.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { type TcpProxy, startTcpProxy } from "../../scripts/tcp-proxy.js";
import { type DynamoDBTransaction, DynamoDBStore, TransactionalDynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { PostgresStore, createIdempotencyTable as createPostgresTable } from "../../entry/postgres.js";
import { RedisStore, ioredisScriptClient } from "../../entry/redis.js";
import { UpstashRedisStore } from "../../entry/upstash.js";

/** The stores' names in the reports, in the order of the tables. */
export const STORE = {
  memory: "InMemoryStore",
  dynamodb: "DynamoDBStore (DynamoDB Local)",
  dynamodbTx: "TransactionalDynamoDBStore (DynamoDB Local, transactional)",
  postgres: "PostgresStore (PostgreSQL)",
  postgresTx: "PostgresStore (PostgreSQL, transactional)",
  redis: "RedisStore (ioredis → redis-server)",
  redisCluster: "RedisStore (Redis Cluster, 16 buckets)",
  upstash: "UpstashRedisStore (REST → redis-server)",
} as const;

/** A store whose network to the backend can be cut for real (see scripts/tcp-proxy.ts). */
export interface Partitioned {
  store: ClaimingStore;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export interface Backend {
  name: string;
  make(namespace: string): Promise<ClaimingStore>;
  /** The same store, reached through a proxy the test can cut: a real network outage. */
  partitioned?(namespace: string): Promise<Partitioned>;
  close?(): Promise<void>;
}

/** A transactional store on its real backend, and where the handler's effects are written and counted. */
export interface TransactionalBackend {
  name: string;
  make(namespace: string): Promise<TransactionalStore<unknown>>;
  /** The effect: one row / item written through `ctx.tx`, tagged with the run. */
  write(run: string): (id: string, tx: unknown) => Promise<void>;
  /** Effects per id of one run, read from the database. */
  count(run: string): Promise<Map<string, number>>;
  close?(): Promise<void>;
}

export function memoryBackend(): Backend {
  return { name: STORE.memory, make: async (namespace) => new InMemoryStore({ namespace }) };
}

/** One DynamoDB Local table of the idempotency shape and a client for it; `ready()` creates it on first use. */
export function dynamodbLocalTable(prefix: string) {
  const endpoint = inject("dynamodbEndpoint");
  const client = new DynamoDBClient(localClientConfig(endpoint));
  const table = `${prefix}-${Date.now().toString(36)}`;
  let created: Promise<void> | undefined;
  return { endpoint, client, table, ready: () => (created ??= createIdempotencyTable(client, idempotencyTableDefinition(table))) };
}

export function dynamodbBackend(): Backend {
  const { endpoint, client, table, ready } = dynamodbLocalTable("reliability");
  return {
    name: STORE.dynamodb,
    make: async (namespace) => {
      await ready();
      return new DynamoDBStore({ table, client, namespace });
    },
    partitioned: async (namespace) => {
      await ready();
      const proxy = await startTcpProxy({ targetPort: Number(new URL(endpoint).port) });
      const cutClient = new DynamoDBClient(localClientConfig(`http://127.0.0.1:${proxy.port}`));
      return {
        store: new DynamoDBStore({ table, client: cutClient, namespace }),
        cut: proxy.cut,
        heal: proxy.heal,
        close: async () => {
          cutClient.destroy();
          await proxy.close();
        },
      };
    },
    close: async () => client.destroy(),
  };
}

export function upstashBackend(): Backend {
  const url = inject("upstashUrl");
  const token = inject("upstashToken");
  return {
    name: STORE.upstash,
    make: async (namespace) => new UpstashRedisStore({ url, token, namespace }),
    partitioned: async (namespace) => {
      const proxy = await startTcpProxy({ targetPort: Number(new URL(url).port) });
      const client = new UpstashRedis({ url: `http://127.0.0.1:${proxy.port}`, token, enableTelemetry: false, retry: { retries: 1, backoff: () => 50 } });
      return { store: new UpstashRedisStore({ client, namespace, timeoutMs: 1_000 }), cut: proxy.cut, heal: proxy.heal, close: proxy.close };
    },
  };
}

/**
 * A pg pool as every user of PostgresStore needs one: with an `error` listener (an idle pooled
 * connection the server terminates is an `error` event; unheard, it ends the process) and a
 * bounded wait for a connection — roomy: the race sends 75 claims at once through `max`
 * connections on a loaded machine, and a claim that times out waiting is a refused delivery.
 * `errors()` counts the events heard.
 */
export function listenedPool(connectionString: string, max: number): { pool: pg.Pool; errors(): number } {
  let errors = 0;
  const pool = new pg.Pool({ connectionString, max, connectionTimeoutMillis: 15_000 });
  pool.on("error", () => {
    errors += 1;
  });
  return { pool, errors: () => errors };
}

export function postgresBackend(): Backend {
  const url = inject("postgresUrl");
  const { pool } = listenedPool(url, 20);
  let created: Promise<void> | undefined;
  const ready = () => (created ??= createPostgresTable(pool));
  return {
    name: STORE.postgres,
    make: async (namespace) => {
      await ready();
      return new PostgresStore({ pool, namespace });
    },
    partitioned: async (namespace) => {
      await ready();
      const proxy = await startTcpProxy({ targetPort: Number(new URL(url).port) });
      const cutUrl = new URL(url);
      cutUrl.port = String(proxy.port);
      const cut = listenedPool(cutUrl.toString(), 10);
      return {
        store: new PostgresStore({ pool: cut.pool, namespace }),
        cut: proxy.cut,
        heal: proxy.heal,
        close: async () => {
          await cut.pool.end();
          await proxy.close();
        },
      };
    },
    close: () => pool.end(),
  };
}

/** An ioredis client as every user of RedisStore needs one: an `error` listener, quick reconnects. */
function listenedRedis(port: number): Redis {
  const client = new Redis({ host: "127.0.0.1", port, retryStrategy: () => 50 });
  client.on("error", () => {});
  return client;
}

export function redisBackend(): Backend {
  const port = inject("redisPort");
  const client = listenedRedis(port);
  return {
    name: STORE.redis,
    make: async (namespace) => new RedisStore({ client: ioredisScriptClient(client), namespace }),
    partitioned: async (namespace) => {
      const proxy = await startTcpProxy({ targetPort: port });
      const cutClient = listenedRedis(proxy.port);
      return {
        store: new RedisStore({ client: ioredisScriptClient(cutClient), namespace, timeoutMs: 1_000 }),
        cut: proxy.cut,
        heal: proxy.heal,
        close: async () => {
          cutClient.disconnect();
          await proxy.close();
        },
      };
    },
    close: async () => void client.disconnect(),
  };
}

export function redisClusterBackend(): Backend {
  const ports = inject("redisClusterPorts");
  const cluster = new Cluster(ports.map((port) => ({ host: "127.0.0.1", port })));
  cluster.on("error", () => {});
  return {
    name: STORE.redisCluster,
    make: async (namespace) => new RedisStore({ client: ioredisScriptClient(cluster), namespace, buckets: 16 }),
    // One proxy per node, and the client's natMap sends every node's own address through its proxy: cutting them all is the partition.
    partitioned: async (namespace) => {
      const proxies = await Promise.all(ports.map((port) => startTcpProxy({ targetPort: port })));
      const natMap = Object.fromEntries(ports.map((port, i) => [`127.0.0.1:${port}`, { host: "127.0.0.1", port: (proxies[i] as TcpProxy).port }]));
      const cutCluster = new Cluster([{ host: "127.0.0.1", port: (proxies[0] as TcpProxy).port }], { natMap, clusterRetryStrategy: () => 100 });
      cutCluster.on("error", () => {});
      return {
        store: new RedisStore({ client: ioredisScriptClient(cutCluster), namespace, buckets: 16, timeoutMs: 1_000 }),
        cut: () => {
          for (const proxy of proxies) proxy.cut();
        },
        heal: () => {
          for (const proxy of proxies) proxy.heal();
        },
        close: async () => {
          cutCluster.disconnect();
          await Promise.all(proxies.map((proxy) => proxy.close()));
        },
      };
    },
    close: async () => void cluster.disconnect(),
  };
}

/** PostgresStore in transactional mode: the effect is a row of `reliability_effects`, in the same transaction as the commit. */
export function postgresTransactionalBackend(): TransactionalBackend {
  const { pool } = listenedPool(inject("postgresUrl"), 40);
  let created: Promise<void> | undefined;
  const ready = () =>
    (created ??= (async () => {
      await createPostgresTable(pool);
      await pool.query("CREATE TABLE IF NOT EXISTS reliability_effects (message_id text NOT NULL, run text NOT NULL)");
      await pool.query("CREATE INDEX IF NOT EXISTS reliability_effects_run ON reliability_effects (run)");
    })());
  return {
    name: STORE.postgresTx,
    make: async (namespace) => {
      await ready();
      return new PostgresStore<pg.PoolClient>({ pool, namespace }) as TransactionalStore<unknown>;
    },
    write: (run) => postgresEffect("reliability_effects", run),
    count: (run) => postgresEffects(pool, "reliability_effects", run),
    // A handler hung past the deadline may still hold a connection (Lambda would freeze or kill it): do not wait for it.
    close: () => Promise.race([pool.end(), new Promise<void>((resolve) => setTimeout(resolve, 2_000))]),
  };
}

/** The handler's effect in transactional mode on PostgreSQL: one row in `table`, through the transaction's client. */
export function postgresEffect(table: string, run: string): (id: string, tx: unknown) => Promise<void> {
  return async (id, tx) => {
    await txOf<pg.PoolClient>({ tx }).query(`INSERT INTO ${table} (message_id, run) VALUES ($1, $2)`, [id, run]);
  };
}

/** Effect rows per id of `run` in `table`. */
export async function postgresEffects(pool: pg.Pool, table: string, run: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ message_id: string; n: string }>(`SELECT message_id, count(*) AS n FROM ${table} WHERE run = $1 GROUP BY message_id`, [run]);
  return new Map(rows.map((row) => [row.message_id, Number(row.n)]));
}

/** TransactionalDynamoDBStore: the effect is an item of an effects table, written in the commit's TransactWriteItems. */
export function dynamodbTransactionalBackend(): TransactionalBackend {
  const store = dynamodbLocalTable("reliability-tx");
  const effects = dynamodbLocalTable("reliability-tx-effects");
  return {
    name: STORE.dynamodbTx,
    make: async (namespace) => {
      await Promise.all([store.ready(), effects.ready()]);
      return new TransactionalDynamoDBStore({ table: store.table, client: store.client, namespace }) as TransactionalStore<unknown>;
    },
    write: (run) => dynamodbEffect(effects.table, run),
    count: (run) => dynamodbEffects(effects.client, effects.table, run),
    close: async () => {
      store.client.destroy();
      effects.client.destroy();
    },
  };
}

/** The handler's effect in transactional mode on DynamoDB: one item (`<id>#<uuid>`) put through the transaction. */
export function dynamodbEffect(table: string, run: string): (id: string, tx: unknown) => Promise<void> {
  return async (id, tx) => {
    txOf<DynamoDBTransaction>({ tx }).put({ TableName: table, Item: { pk: { S: `${id}#${crypto.randomUUID()}` }, message_id: { S: id }, run: { S: run } } });
  };
}

/** Effect items per id of `run` in `table` (a consistent scan). */
export async function dynamodbEffects(client: DynamoDBClient, table: string, run: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: table,
        ConsistentRead: true,
        FilterExpression: "#run = :run",
        ExpressionAttributeNames: { "#run": "run" },
        ExpressionAttributeValues: { ":run": { S: run } },
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of page.Items ?? []) {
      const id = item.message_id?.S as string;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return counts;
}
