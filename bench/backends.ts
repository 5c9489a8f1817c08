/**
 * BENCH — the backends of one run, all on loopback, each behind a delay proxy:
 *   - DynamoDB Local (scripts/dynamodb-local.mjs), one table per kit in its own key layout;
 *   - one redis-server (test/setup/redis.ts) reached over TCP, and the Upstash REST bridge
 *     (test/support/upstash-bridge.ts) in front of that same server, reached over HTTP.
 * Everything is started here and stopped by `stop()`, whatever happened.
 *
 * Request counters: AWS SDK middleware (one count per HTTP attempt) for DynamoDB clients, the
 * bridge's own counter for the REST path, a counting wrapper for TCP Redis clients. Billed units:
 * a `DynamoMeter` on a DynamoDB client, and the redis-server's own `INFO commandstats`.
 *
 * What this is *not*: a fixture for the test suite (that has its own global setups).
 */
import { randomBytes } from "node:crypto";
import { CreateTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types";
import { createClient } from "@redis/client";
import { Redis } from "ioredis";
import { localClientConfig, onEveryRequest, startDynamoDBLocal } from "../scripts/dynamodb-local.mjs";
import { createIdempotencyTable, idempotencyTableDefinition } from "../entry/dynamodb.js";
import { startRedisServer } from "../test/setup/redis.js";
import { type UpstashBridge, startUpstashBridge } from "../test/support/upstash-bridge.js";
import { type TcpProxy, startTcpProxy } from "../scripts/tcp-proxy.js";
import { type DynamoMeter, parseCommandStats } from "./billing.js";
import { Tally } from "./kit.js";

export const OUR_TABLE = "bq-bench-ours";
export const POWERTOOLS_TABLE = "bq-bench-powertools";

export interface Backends {
  readonly delayMs: number;
  /** A DynamoDB client through the delay proxy, counting its HTTP requests into `tally` (and its billed units into `meter`). */
  dynamodbClient(tally: Tally, meter?: DynamoMeter): DynamoDBClient;
  /** `INFO commandstats` of the redis-server, read on a direct connection (not through a proxy, not counted as a kit's). */
  redisCommandCalls(): Promise<Map<string, number>>;
  /** An ioredis client through the delay proxy (for our RedisStore over TCP). */
  ioredis(): Promise<Redis>;
  /** A connected @redis/client through the delay proxy (for Powertools' CachePersistenceLayer). */
  nodeRedis(): Promise<CacheClient>;
  /** The Upstash REST URL (through the delay proxy) and token. */
  readonly upstash: { readonly url: string; readonly token: string };
  readonly bridge: UpstashBridge;
  /** Endpoints through the delay proxies, for clients made elsewhere (the fleet's worker threads). */
  readonly endpoints: { readonly dynamodb: string; readonly redis: string };
  stop(): Promise<void>;
}

function countRequests(client: DynamoDBClient, tally: Tally): DynamoDBClient {
  // After the retry middleware: one count per HTTP request actually sent.
  return onEveryRequest(client, () => tally.add());
}

export async function startBackends(delayMs: number): Promise<Backends> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
  };
  try {
    const [dynamo, redis] = await Promise.all([startDynamoDBLocal(), startRedisServer()]);
    stops.push(() => dynamo.stop(), () => redis.stop());
    const token = randomBytes(24).toString("base64url");
    const bridge = await startUpstashBridge({ redisPort: redis.port, token });
    stops.push(() => bridge.close());
    const bridgePort = Number(new URL(bridge.url).port);
    const proxies: TcpProxy[] = await Promise.all([
      startTcpProxy({ targetPort: dynamo.port, delayMs }),
      startTcpProxy({ targetPort: redis.port, delayMs }),
      startTcpProxy({ targetPort: bridgePort, delayMs }),
    ]);
    for (const proxy of proxies) stops.push(() => proxy.close());
    const [dynamoProxy, redisProxy, bridgeProxy] = proxies as [TcpProxy, TcpProxy, TcpProxy];

    const clients: { close(): Promise<void> }[] = [];
    stops.push(async () => {
      for (const client of clients) await client.close().catch(() => undefined);
    });
    const dynamodbClient = (tally: Tally, meter?: DynamoMeter) => {
      const client = new DynamoDBClient(localClientConfig(`http://127.0.0.1:${dynamoProxy.port}`));
      clients.push({ close: async () => client.destroy() });
      if (meter !== undefined) meter.attach(client);
      return countRequests(client, tally);
    };
    const admin = new Redis({ host: "127.0.0.1", port: redis.port, lazyConnect: true });
    await admin.connect();
    clients.push({ close: async () => void admin.disconnect() });

    const tables = dynamodbClient(new Tally());
    await createIdempotencyTable(tables, idempotencyTableDefinition(OUR_TABLE));
    await tables.send(
      new CreateTableCommand({
        TableName: POWERTOOLS_TABLE,
        AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );

    return {
      delayMs,
      dynamodbClient,
      redisCommandCalls: async () => parseCommandStats(await admin.info("commandstats")),
      ioredis: async () => {
        const client = new Redis({ host: "127.0.0.1", port: redisProxy.port, lazyConnect: true });
        await client.connect();
        clients.push({ close: async () => void client.disconnect() });
        return client;
      },
      nodeRedis: async () => {
        const client = createClient({ url: `redis://127.0.0.1:${redisProxy.port}` });
        await client.connect();
        clients.push({ close: async () => void (await client.close()) });
        return client as unknown as CacheClient;
      },
      upstash: { url: `http://127.0.0.1:${bridgeProxy.port}`, token },
      bridge,
      endpoints: { dynamodb: `http://127.0.0.1:${dynamoProxy.port}`, redis: `redis://127.0.0.1:${redisProxy.port}` },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
