/**
 * BENCH — one consumer of the fleet, run in a worker thread: one "Lambda instance" with its own
 * store client and connections, taking SQS-shaped batches of up to 10 from the coordinator's shared
 * queue (fleet.ts) until told to stop. It runs either kit — ours (`sqsHandler` + a store) or
 * Powertools (`makeIdempotent` + `BatchProcessor` + a persistence layer) — on the backend named in
 * its `workerData`, counts the store requests it sends, and reports per batch: the wall time of the
 * handler call, the requests, the ids whose effect ran, and the deliveries it did not acknowledge.
 *
 * What this is *not*: a Lambda runtime (no cold starts, no freeze); a thread is a cheap stand-in
 * for an instance, with its own event loop and its own sockets.
 */
import { parentPort, workerData } from "node:worker_threads";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types";
import { createClient } from "@redis/client";
import type { SQSEvent } from "aws-lambda";
import { Redis } from "ioredis";
import pg from "pg";
import { localClientConfig, onEveryRequest } from "../../scripts/dynamodb-local.mjs";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { type PgPoolLike, PostgresStore } from "../../entry/postgres.js";
import { RedisStore, ioredisScriptClient } from "../../entry/redis.js";
import { envelopeBody } from "../fixtures/sqs.js";
import { type Kit, Tally } from "../kit.js";
import { oursKit } from "../ours.js";
import { powertoolsKit } from "../powertools.js";
import { countingCacheClient, countingScriptClient } from "../store-runs.js";
import type { FleetBackend, FleetKit, FromConsumer, ToConsumer } from "./protocol.js";

interface ConsumerData {
  readonly kit: FleetKit;
  readonly backend: FleetBackend;
  readonly endpoint: string;
  readonly namespace: string;
  readonly ourTable: string;
  readonly powertoolsTable: string;
  readonly postgresTable: string;
}

const data = workerData as ConsumerData;
const port = parentPort;
if (port === null) throw new Error("fleet consumer: run me as a worker thread");
const closers: (() => Promise<unknown> | unknown)[] = [];

/** A pg Pool that counts every statement it (or a connection it lent) runs. */
function countingPool(pool: pg.Pool, tally: Tally): PgPoolLike<pg.PoolClient> {
  return {
    query: (text: string, values?: unknown[]) => (tally.add(), pool.query(text, values)),
    connect: async () => {
      const client = await pool.connect();
      const query = client.query.bind(client) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
      return Object.assign(client, { query: (text: string, values?: unknown[]) => (tally.add(), query(text, values)) }) as unknown as pg.PoolClient & { release(): void };
    },
  } as PgPoolLike<pg.PoolClient>;
}

async function makeKit(): Promise<Kit> {
  const tally = new Tally();
  switch (data.backend) {
    case "DynamoDB": {
      const client = onEveryRequest(new DynamoDBClient(localClientConfig(data.endpoint)), () => tally.add());
      closers.push(() => client.destroy());
      return data.kit === "ours"
        ? oursKit("ours", "", new DynamoDBStore({ table: data.ourTable, namespace: data.namespace, client }), tally)
        : powertoolsKit("Powertools", "", new DynamoDBPersistenceLayer({ tableName: data.powertoolsTable, awsSdkV3Client: client }), tally);
    }
    case "Redis": {
      const url = new URL(data.endpoint);
      if (data.kit === "ours") {
        const redis = new Redis({ host: url.hostname, port: Number(url.port), lazyConnect: true });
        await redis.connect();
        closers.push(() => redis.disconnect());
        return oursKit("ours", "", new RedisStore({ client: countingScriptClient(ioredisScriptClient(redis), tally), namespace: data.namespace }), tally);
      }
      const client = createClient({ url: data.endpoint });
      await client.connect();
      closers.push(() => client.close());
      return powertoolsKit("Powertools", "", new CachePersistenceLayer({ client: countingCacheClient(client as unknown as CacheClient, tally) }), tally);
    }
    case "PostgreSQL": {
      if (data.kit !== "ours") throw new Error("Powertools has no PostgreSQL persistence layer");
      const pool = new pg.Pool({ connectionString: data.endpoint, max: 4 });
      // An idle connection's error (a restarted server) must never end the consumer.
      pool.on("error", () => undefined);
      closers.push(() => pool.end());
      return oursKit("ours", "", new PostgresStore({ pool: countingPool(pool, tally), namespace: data.namespace, table: data.postgresTable }), tally);
    }
  }
}

const kit = await makeKit();
const send = (message: FromConsumer) => port.postMessage(message);

port.on("message", async (message: ToConsumer) => {
  if (message.type === "stop") {
    for (const close of closers) await Promise.resolve(close()).catch(() => undefined);
    port.close();
    return;
  }
  const event: SQSEvent = {
    Records: message.deliveries.map((delivery) =>
      sqsRecord(envelopeBody(delivery.id), { messageId: delivery.messageId, receiveCount: String(delivery.receiveCount) }),
    ),
  };
  const ran: string[] = [];
  const before = new Map(message.deliveries.map((delivery) => [delivery.id, kit.effect.perId.get(delivery.id) ?? 0]));
  kit.requests.reset();
  const started = performance.now();
  let failed: string[];
  let error: string | undefined;
  try {
    const response = await kit.handler(event, lambdaContext());
    failed = response.batchItemFailures.map((failure) => failure.itemIdentifier);
  } catch (thrown) {
    failed = message.deliveries.map((delivery) => delivery.messageId);
    error = thrown instanceof Error ? thrown.name : typeof thrown;
  }
  const ms = performance.now() - started;
  for (const [id, count] of before) {
    for (let n = (kit.effect.perId.get(id) ?? 0) - count; n > 0; n -= 1) ran.push(id);
  }
  send({ type: "done", ms, requests: kit.requests.count, ran, failed, ...(error === undefined ? {} : { error }) });
});

send({ type: "ready" });
